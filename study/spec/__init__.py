"""Study files: what a study asks for. The study file model, loading with ``--set`` overrides,
validation, expansion into trials, machine-independent trial keys, row labels and the run's
options. Imports nothing else of ``study``."""
