"""Ray for a study: the cluster address and whether one trial fits, a local instance started safely
(loopback only, patient health checks), the MLflow store reached while Ray starts, and Ray
stopped while the tables are written."""

from __future__ import annotations

import gc
import logging
import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

from nmt.errors import UserError
from nmt.memory import malloc_env
from nmt.numerics import numerics_env
from study.execution.sqlite_store import sqlite_file
from study.execution.tracking import StudyTracker
from study.spec.model import StudySpec
from study.spec.options import RunOptions
from study.store.object_store import worker_env


def check_address(opts: RunOptions) -> str | None:
    """The cluster address (--address, else RAY_ADDRESS; None for a local instance), after
    checking that something listens there: an unreachable one fails in seconds with one line
    (ray.init would wait long)."""
    address = opts.how.address or os.environ.get("RAY_ADDRESS") or None
    if not address or address in ("auto", "local"):
        return address if address == "auto" else None
    flag = "--address" if opts.how.address else "RAY_ADDRESS="
    host_port = address.split("://", 1)[-1].rstrip("/")
    host, _, port = host_port.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"{flag}{' ' if opts.how.address else ''}{address!r}: expected HOST:PORT (e.g. 10.0.0.5:6379), "
                        f"ray://HOST:PORT or auto")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as err:
        unset = "" if opts.how.address else " (or unset RAY_ADDRESS for a local instance)"
        raise UserError(f"{flag}{' ' if opts.how.address else ''}{address}: cannot reach a Ray cluster there "
                        f"({err.strerror or err}); start one with `ray start --head --port {port}` or check the "
                        f"address (and firewall){unset}") from None
    return address


def trial_resources(spec: StudySpec, opts: RunOptions) -> dict:
    """What one trial asks Ray for: CPUs (also its torch threads) and a GPU share."""
    gpu = opts.how.gpus_per_trial if opts.how.gpus_per_trial is not None else spec.fields.resources.gpu
    return {"cpu": spec.fields.resources.cpu, "gpu": gpu}


def local_cpus(opts: RunOptions) -> int:
    """The CPUs of the local Ray instance: --cpus, else this machine's."""
    return opts.how.cpus or os.cpu_count() or 1


def trials_at_once(resources: dict, opts: RunOptions) -> int:
    """How many trials run side by side: --max-concurrent, else as many as the local CPUs hold."""
    return opts.how.max_concurrent or max(1, int(local_cpus(opts) // resources["cpu"]))


def _gpu_source(opts: RunOptions) -> str:
    return f"--gpus-per-trial {opts.how.gpus_per_trial}" if opts.how.gpus_per_trial is not None else "resources.gpu"


def check_local_fit(resources: dict, opts: RunOptions) -> None:
    """A trial that no local resource can hold would wait forever in Ray's queue: refuse it now."""
    cpus = local_cpus(opts)
    if resources["cpu"] > cpus:
        raise UserError(f"resources.cpu = {resources['cpu']:g}: a trial needs more CPUs than the local Ray instance "
                        f"has ({cpus}); lower it (--set resources.cpu={cpus}) or raise --cpus")
    if resources["gpu"] > 0:
        # torch loads only where a model is built or timed, not when the driver starts
        import torch

        gpus = torch.cuda.device_count()
        if resources["gpu"] > gpus:
            have = "no CUDA GPU that torch can use" if gpus == 0 else f"{gpus} GPU(s)"
            raise UserError(f"{_gpu_source(opts)} = {resources['gpu']:g}: this machine has {have}; leave it out "
                            f"(--gpus-per-trial 0 trains on the CPU) or run on a machine or cluster with GPUs")


def check_cluster_fit(resources: dict, address: str) -> None:
    # Ray loads when trials run or a cluster is probed (seconds of start-up), not when a study is checked
    import ray

    nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
    if any(node.get("CPU", 0) >= resources["cpu"] and node.get("GPU", 0) >= resources["gpu"] for node in nodes):
        return
    largest = max(nodes, key=lambda node: (node.get("GPU", 0), node.get("CPU", 0)), default={})
    need = f"{resources['cpu']:g} CPU(s)" + (f" and {resources['gpu']:g} GPU(s)" if resources["gpu"] else "")
    raise UserError(f"no node of the Ray cluster at {address} has {need} for one trial (the largest of its "
                    f"{len(nodes)} node(s) has {largest.get('CPU', 0):g} CPU(s) and {largest.get('GPU', 0):g} "
                    f"GPU(s)); lower resources.cpu / --gpus-per-trial or add a larger node")


# Ray declares its own local node dead, and kills it, after 5 missed 10 s health checks. With
# every core busy training (the point of a study) the checks can stall that long, and the whole
# study died with "Owner's node has crashed"; on one machine there is no other node to fail over
# to, so wait for about 5 minutes instead.
LOCAL_HEALTH_CHECKS = {"health_check_timeout_ms": 30_000, "health_check_failure_threshold": 10}


def start_services(tracker: StudyTracker, opts: RunOptions, numerics: str = "portable") -> None:
    """Connect to the MLflow store, then start Ray; a SQLite store in a writable directory is
    reached while Ray starts instead, since a new store's schema migrations and Ray's processes
    each take seconds and neither needs the other. Any other store is reached first, so that one
    that cannot be reached (a bad --tracking-uri) is refused before Ray starts. Errors come in the
    order of the two steps: the store's first."""
    # Ray loads when trials run or a cluster is probed (seconds of start-up), not when a study is checked
    import ray

    if not _local_store(tracker.uri):
        tracker.connect()
        start_ray(opts, numerics)
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mlflow-connect") as pool:
        connecting = pool.submit(tracker.connect)
        try:
            start_ray(opts, numerics)
        except UserError:
            connecting.result()
            raise
    try:
        connecting.result()
    except BaseException:
        ray.shutdown()
        raise


def _local_store(uri: str) -> bool:
    """A SQLite store whose directory exists and is writable: reaching it should not fail."""
    database = sqlite_file(uri)
    return database is not None and database.parent.is_dir() and os.access(database.parent, os.W_OK)


def storage_env(opts: RunOptions) -> dict:
    """Where the driver's ``--storage`` store is (an S3 endpoint and region: its backend names them), for the trial
    workers: never who may use it, each node takes its credentials from its own chain (environment, instance or pod
    role)."""
    return worker_env(opts.where.storage)


def kernels_env() -> dict:
    """The driver's opt-in kernel choice (nmt.ops.kernels), for trial workers on any node."""
    return {"NMT_KERNELS": os.environ["NMT_KERNELS"]} if os.environ.get("NMT_KERNELS") else {}


def start_ray(opts: RunOptions, numerics: str = "portable") -> None:
    """Ray, local or the cluster at --address, with trial workers that start with the malloc settings
    (nmt.memory) and the study's numerics (nmt.numerics) in their environment."""
    # Ray loads when trials run or a cluster is probed (seconds of start-up), not when a study is checked
    import ray

    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    if not opts.report.verbose:  # the error of a trial stopped mid-failure (see the trial store), not news
        os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    # the trial workers keep freed memory (nmt.memory)
    kwargs = {"include_dashboard": False, "log_to_driver": opts.report.verbose, "logging_level": "ERROR",
              "configure_logging": True,
              "runtime_env": {"env_vars": {**malloc_env(), **numerics_env(numerics), **storage_env(opts),
                                           **kernels_env()}}}
    address = opts.how.address or os.environ.get("RAY_ADDRESS") or None
    try:
        if address:
            ray.init(address=address, **kwargs)
        else:  # "local": never attach to some other Ray instance on this machine by accident
            _loopback_only()
            ray.init(address="local", num_cpus=local_cpus(opts), _system_config=LOCAL_HEALTH_CHECKS,
                     **kwargs)
    except Exception as err:  # ConnectionError, RuntimeError, ...: one line either way
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        fix = ("start it with `ray start --head` (and check the address and token)" if address
               else "check that /tmp is writable and no stale Ray processes hold it")
        raise UserError(f"cannot start {where} ({' '.join(str(err).split())[:200]}); {fix}") from None
    if not opts.report.verbose:  # a failed trial is one progress line; its traceback goes to the trial store
        logging.getLogger("ray.tune.execution.tune_controller").setLevel(logging.CRITICAL)


class BackgroundShutdown:
    """``ray.shutdown()`` in a thread, so Ray's processes wind down while the driver writes its
    tables and plots; ``join()`` waits for it.

    When the last reference to a Ray handle (an ObjectRef, an actor handle) goes while the core
    worker is shutting down in another thread, Ray ends the whole process ("The core worker has
    already been shutdown ... The process will exit"). So the caller drops its own handles
    (the tuner) first; the garbage still holding handles is collected here, before the shutdown
    starts; and the cyclic collector stays off until the shutdown has finished, since the
    shutdown itself can leave handles behind as garbage."""

    def __init__(self) -> None:
        # Ray loads when trials run or a cluster is probed (seconds of start-up), not when a study is checked
        import ray

        gc.collect()
        self._collector_was_on = gc.isenabled()
        gc.disable()
        self._thread = threading.Thread(target=ray.shutdown, name="ray-shutdown")
        self._thread.start()

    def join(self) -> None:
        self._thread.join()
        if self._collector_was_on:
            gc.enable()


def _loopback_only() -> None:
    """Make the local Ray instance listen on 127.0.0.1 only (GCS, raylet, workers, runtime-env
    agent); by default they listen on every interface, reachable from the network. Ray does
    this for single-machine use on macOS and Windows, switched by one setting that Ray reads
    when it is imported (so it is also set on the imported module) and that the processes it
    starts inherit."""
    # Ray loads when trials run or a cluster is probed (seconds of start-up), not when a study is checked
    from ray._private import ray_constants

    os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
