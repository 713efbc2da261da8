"""Running a study: the driver's phases, Ray Tune (tuner, trainable, callbacks, cluster set-up),
MLflow tracking, dry runs and cost estimates, disk watching and the speed and overhead
benchmarks. The only wing that imports Ray and MLflow."""
