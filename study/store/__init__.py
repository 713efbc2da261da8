"""What a study has stored: the trial store (each trial's identity, progress, history and final
record), a study's folder and state, strict reading of every record, which paths the tool owns,
and what ``--resume``, ``--extend`` and ``--reuse-from`` may adopt. Imports ``study.spec`` only."""
