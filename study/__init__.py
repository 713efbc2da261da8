"""Studies of the nmt core on Ray Tune, tracked in MLflow, made into paper-style tables.

From a shell: ``rnmt-study run|list|table|speed|compare|report|bench`` (or ``python -m study.run``, ...).
From Python: ``from study.api import run_study, load_table`` (``study.execution.driver.run_study`` is the
internal driver both use, not the API). Nothing is imported here, so that Ray's trial workers,
which import ``study.execution.trainable``, stay light.
"""
