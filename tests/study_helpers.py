"""Helpers of the end-to-end study tests: run the CLIs as real processes, read their results."""

from __future__ import annotations

import contextlib
import csv
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_ray_env(cache_dir: Path) -> tuple[dict, Path]:
    """Environment for a study subprocess: its own short Ray temp dir, also its TMPDIR (so what a killed
    driver leaves, its Ray storage and MLflow's lock files, goes when the test removes the dir), the shared
    data cache."""
    ray_tmp = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))  # short: Ray's socket paths have a length limit
    env = dict(os.environ, RAY_TMPDIR=str(ray_tmp), TMPDIR=str(ray_tmp), NMT_CACHE_DIR=str(cache_dir), OMP_NUM_THREADS="1",
               RAY_USAGE_STATS_ENABLED="0", PYTHONUNBUFFERED="1")
    env.pop("RAY_ADDRESS", None)
    return env, ray_tmp


# Ray's own node dying (seen about once per full-suite run on the 2-core CI machine, in a
# different test each time, never in a test run alone): infrastructure, not the behaviour
# under test. A run that fails with one of these lines is skipped with that line as reason.
RAY_NODE_LOST = ("Failed to connect to GCS within", "Owner's node has crashed", "cannot start a local Ray instance")


def skip_if_ray_node_lost(returncode: int, output: str) -> None:
    import pytest

    if returncode != 0:
        for line in output.splitlines():
            if any(sign in line for sign in RAY_NODE_LOST):
                pytest.skip(f"Ray's local node died in this run, not the code under test: {line.strip()[:200]}")


def study(*args: str, env: dict, timeout: int = 600, module: str = "study.run") -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", module, *args], check=False, capture_output=True, text=True,
                            cwd=ROOT, env=env, timeout=timeout)
    skip_if_ray_node_lost(result.returncode, result.stdout + result.stderr)
    return result


def in_process(*args: str, module: str = "study.run") -> subprocess.CompletedProcess:
    """A command answered before any Ray, training or tracking starts (a refusal, a table read back): its
    ``main`` called in this process, under this process's environment (``monkeypatch`` it), its output
    captured; the exit code and lines its process would give, without its seconds of imports. What a command
    does as a process (exit status, streams, signals) keeps its subprocess tests."""
    import importlib
    import io

    from nmt.cli import run_main

    main = importlib.import_module(module).main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = run_main(main, list(args))
        except SystemExit as stop:  # argparse's own refusals
            code = stop.code if isinstance(stop.code, int) else 2
    return subprocess.CompletedProcess([module, *args], code, out.getvalue(), err.getvalue())


def start_study(*args: str, env: dict, cwd: Path = ROOT) -> subprocess.Popen:
    """A study driver in its own process group, its output (stdout and stderr) readable line by line."""
    return subprocess.Popen([sys.executable, "-m", "study.run", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def wait_for(process: subprocess.Popen, needle: str, timeout: float = 300) -> list[str]:
    """Read the process's output until a line contains ``needle``; the lines read so far."""
    lines = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = process.stdout.readline()
        if not line:
            if process.poll() is not None:
                break
            continue
        lines.append(line)
        if needle in line:
            return lines
    raise AssertionError(f"never saw {needle!r}; output:\n{''.join(lines)[-4000:]}")


class LoopbackCluster:
    """A Ray cluster of ``nodes`` one-CPU nodes on this machine, for ``with``: a head and workers.

    Each node runs in its own session so that the kernel's per-session CPU sharing (autogroup)
    treats it like a separate machine: left in the test's session, Ray's low-priority (nice 15)
    trial workers starved behind the test processes of the other xdist worker. On exit only
    these nodes are killed; ``ray stop`` would kill every Ray instance on the machine.
    ``places``: per node, (its working directory, extra environment), as separate machines would differ.
    ``cpus``: each node's CPUs."""

    def __init__(self, env: dict, nodes: int = 2, places: list[tuple[Path, dict]] | None = None, cpus: int = 1):
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = env
        self.count = nodes
        self.cpus = cpus
        self.places = places or [(ROOT, {})] * nodes
        self.nodes: list[subprocess.Popen] = []

    def __enter__(self) -> LoopbackCluster:
        ray_bin = str(Path(sys.executable).parent / "ray")
        common = [f"--num-cpus={self.cpus}", "--node-ip-address=127.0.0.1", "--disable-usage-stats", "--block"]
        head = [ray_bin, "start", "--head", f"--port={self.port}", "--include-dashboard=false", *common]
        worker = [ray_bin, "start", f"--address={self.address}", *common]
        try:
            self.nodes.append(self._start(head))
            self.wait_for_nodes(1)
            for _ in range(self.count - 1):
                self.nodes.append(self._start(worker))
            self.wait_for_nodes(self.count)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _start(self, command: list[str]) -> subprocess.Popen:
        cwd, extra = self.places[len(self.nodes)]
        Path(cwd).mkdir(parents=True, exist_ok=True)
        return subprocess.Popen(command, env={**self.env, **extra}, cwd=cwd, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)

    def wait_for_nodes(self, count: int, timeout: float = 120) -> None:
        probe = (f"import ray; ray.init(address='{self.address}', logging_level='ERROR'); "
                 "print(sum(n['Alive'] for n in ray.nodes()))")
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(node.poll() is not None for node in self.nodes):
                raise AssertionError(f"a Ray node of the cluster at {self.address} exited on start")
            result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=self.env,
                                    timeout=60, check=False)
            if result.stdout.strip().splitlines()[-1:] == [str(count)]:
                return
            time.sleep(1)
        raise AssertionError(f"the cluster at {self.address} never had {count} nodes")

    def alive(self) -> bool:
        return bool(self.nodes) and all(node.poll() is None for node in self.nodes)

    def kill_node(self, index: int) -> None:
        """SIGKILL node ``index`` (0 is the head) and every process it started."""
        node = self.nodes[index]
        if node.poll() is None:
            os.killpg(node.pid, 9)
            node.wait()

    def __exit__(self, *_) -> None:
        for index in reversed(range(len(self.nodes))):
            self.kill_node(index)


def listening_addresses(root_pid: int) -> set[str]:
    """The addresses on which process ``root_pid`` and all its descendants accept TCP connections
    (from /proc: no extra dependency)."""
    import ipaddress

    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    pids, todo = set(), [root_pid]
    while todo:
        pid = todo.pop()
        pids.add(pid)
        todo += children.get(pid, [])
    inodes = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    link = os.readlink(fd)
                    if link.startswith("socket:["):
                        inodes.add(link[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            columns = row.split()
            if columns[3] != "0A" or columns[9] not in inodes:  # 0A: LISTEN
                continue
            hex_ip = columns[1].split(":")[0]
            raw = b"".join(bytes.fromhex(hex_ip[i:i + 8])[::-1] for i in range(0, len(hex_ip), 8))
            found.add(str(ipaddress.ip_address(raw)))
    return found


def is_loopback(address: str) -> bool:
    import ipaddress

    ip = ipaddress.ip_address(address)
    return ip.is_loopback or (ip.version == 6 and ip.ipv4_mapped is not None and ip.ipv4_mapped.is_loopback)


def wait_until_listening(server: subprocess.Popen, port: int, what: str, timeout: float) -> None:
    """Until ``server`` accepts connections on the loopback ``port``; fails if it exits or takes longer."""
    deadline = time.time() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert server.poll() is None and time.time() < deadline, f"{what} did not start"
            time.sleep(0.2)


@contextlib.contextmanager
def mlflow_server(tmp_path: Path, env: dict):
    """An MLflow tracking server on loopback that stores and serves the artifacts (``tmp_path/artifacts``):
    its URI and its process (a test may kill it); stopped when the block ends."""
    port = free_port()
    server = subprocess.Popen([str(Path(sys.executable).parent / "mlflow"), "server", "--host", "127.0.0.1",
                               "--port", str(port), "--workers", "1",
                               "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
                               "--artifacts-destination", str(tmp_path / "artifacts")],
                              # without its job runner: seven worker processes the test never uses, on 2 cores
                              env={**env, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until_listening(server, port, "the MLflow server", timeout=120)
        yield f"http://127.0.0.1:{port}", server
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def table_rows(results: Path, name: str, file: str = "table.csv") -> list[dict]:
    with open(results / name / file, encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def mlflow_runs(results: Path, study_name: str, uri: str | None = None):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri or f"sqlite:///{results / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(study_name)
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("role") == "study"]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    return client, parents, children


def grid_study(name: str, variants: str, seeds: int = 1, epochs: int = 2, cell: str = "gru",
               patience: int | None = None) -> str:
    """A tiny study file: ``variants`` is the YAML list body (one "- {label: ..., set: {...}}" per line)."""
    return f"""
name: {name}
description: a tiny study of the fault tests
data: {{preset: synthetic, size: 300, valid_size: 20, test_size: 20, max_len: 60, spm: {{vocab_size: 200}}}}
base:
  model: {{cell: {cell}, hidden: 16, emb: 16}}
  train: {{batch_tokens: 600}}
  decode: {{beam: 2}}
variants:
{variants}
seeds: {seeds}
budget: {{epochs: {epochs}{f", patience: {patience}" if patience is not None else ""}}}
"""


def search_study(name: str, space: str, samples: int, sampler: str = "random", epochs: int = 3) -> str:
    """A tiny Optuna search study file: ``space`` is the YAML body of ``search.space`` (one "    key: {...}" per
    line)."""
    return f"""
name: {name}
description: a tiny search of the tests
data: {{preset: synthetic, size: 300, valid_size: 20, test_size: 20, max_len: 60, spm: {{vocab_size: 200}}}}
base:
  model: {{cell: gru, hidden: 16, emb: 16}}
  train: {{batch_tokens: 600}}
  decode: {{beam: 2}}
search:
  algorithm: optuna
  sampler: {sampler}
  num_samples: {samples}
  space:
{space}
metric: {{name: valid_bleu, mode: max}}
budget: {{epochs: {epochs}}}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def built_once(tmp_path_factory, name: str, build) -> Path:
    """A folder that ``build(folder)`` fills once per test run, shared by the xdist workers (each would
    otherwise build its own): the first worker to ask builds it under a lock, the others wait for it and
    read it. Its users must not change it (copy it first)."""
    import fcntl
    import shutil

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's own temporary directory, above each worker's
    folder = root / f"built-{name}"
    with open(root / f"built-{name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        if not (folder / ".built").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / ".built").touch()
    return folder


@contextlib.contextmanager
def small_file_system(path: Path, megabytes: int = 64):
    """A tmpfs of ``megabytes`` mounted at ``path`` (a disk that can really fill up); skips the
    test where mounting is not allowed (not root)."""
    import pytest

    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(path)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small file system here (needs root): {mounted.stderr.strip()[:200]}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "--lazy", "--recursive", str(path)], capture_output=True, check=False)


@contextlib.contextmanager
def read_only(path: Path, patience: float = 20.0):
    """``path`` read-only for everyone, root included (a read-only bind mount over it).

    A process writing under ``path`` may open a file through the fresh bind mount before it
    turns read-only; the kernel then refuses the remount (EBUSY) while that file is open, so
    the remount is retried until the write ends, and the mount is detached lazily."""
    subprocess.run(["mount", "--bind", str(path), str(path)], check=True, capture_output=True)
    try:
        deadline = time.monotonic() + patience
        while True:
            remount = subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], capture_output=True, text=True)
            if remount.returncode == 0:
                break
            if "busy" not in remount.stderr or time.monotonic() > deadline:
                raise RuntimeError(f"cannot make {path} read-only: {remount.stderr.strip()}")
            time.sleep(0.05)
        yield path
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=True, capture_output=True)
