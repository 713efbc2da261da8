"""A whole study between a local results directory and an object store (``--storage URI``).

In the store a study is two folders, as under ``--results``: ``NAME/`` (the study folder:
``study.json``, ``command.txt`` and the exports, tables and figures) and ``ray/NAME/`` (the trial
store, mirrored trial by trial by ``study.store.store_mirror``, and a search's Optuna study as
``optuna.db``). The driver of ``study.run`` brings both down before it reads anything and puts them
up when it ends; the reading commands (``study.table``, ``study.list``, ``study.compare``, the
Python API) bring them down into their ``--results`` and read there.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from nmt.fileio import write_bytes
from study.spec.model import STUDY_NAME
from study.store.object_backend import ObjectStore, StorageError
from study.store.object_store import open_store
from study.store.ownership import key_path
from study.store.records import experiment_dir
from study.store.store_mirror import StoreMirror, check_json
from study.store.study_state import STATE_FILE
from study.store.trial_store import TrialStore

STUDY_FILES = (STATE_FILE, "command.txt")  # what --resume needs of the study folder
SEARCH_DB = "optuna.db"  # a search study's Optuna study, in the store beside its trial store


def trial_store_prefix(study: str) -> str:
    return f"ray/{study}"


def pull_study_files(store: ObjectStore, study: str, study_dir: Path) -> None:
    """``study.json`` and ``command.txt`` where the local study folder has none (a driver's own copy
    stays: its checks compare the two)."""
    for name in STUDY_FILES:
        data = store.read(f"{study}/{name}")
        if data is not None and not (study_dir / name).exists():
            if name.endswith(".json"):
                check_json(store.where(f"{study}/{name}"), data)
            write_bytes(study_dir / name, data)


def pull_trials(store: ObjectStore, study: str, exp_dir: Path) -> list[str]:
    """Every trial's records into the local trial store, markers last; the finished trials' keys."""
    return StoreMirror(store, trial_store_prefix(study), exp_dir).pull_records()


def push_study(store: ObjectStore, study: str, study_dir: Path, exp_dir: Path) -> None:
    """The study folder (every file) and each trial's records as they are locally."""
    if study_dir.is_dir():
        for path in sorted(study_dir.rglob("*")):
            if path.is_file() and not path.is_symlink():
                store.write(f"{study}/{path.relative_to(study_dir).as_posix()}", path.read_bytes())
    mirror = StoreMirror(store, trial_store_prefix(study), exp_dir)
    for key in TrialStore(exp_dir).keys():
        mirror.push_records(key)


def push_finished_trials(store: ObjectStore, study: str, exp_dir: Path) -> int:
    """Every trial finished in the local store whose result the object store lacks (a study first run
    without ``--storage``, then continued with it): its records and ``finished/KEY/``, marker last; how many
    went up. A trial the store holds as finished keeps that result (write-once marker). The driver calls it
    when it takes the store; trials that finish during the run put themselves up."""
    mirror, store_of = StoreMirror(store, trial_store_prefix(study), exp_dir), TrialStore(exp_dir)
    pushed = 0
    for key in store_of.keys():
        if store_of.finished_metrics(key) is not None and not mirror.finished_up(key):
            pushed += mirror.push_result(key)
    return pushed


def stored_studies(store: ObjectStore) -> list[str]:
    """The names of the studies whose trial store is in ``store``; a name there that is not a study's
    (``ray/../``, ``ray//``) is one line: it would be read into a folder outside ``--results``."""
    names = {key.split("/")[1] for key in store.keys("ray") if key.count("/") >= 2}
    for name in sorted(names):
        if not STUDY_NAME.fullmatch(name):
            raise StorageError(f"{store.where(trial_store_prefix(name))}/: {name!r} is not a study name (letters, "
                               f"digits, _ and -, starting with a letter); delete or rename those objects in the store")
    return sorted(names)


def bring_down(store: ObjectStore, study: str, results_root: Path) -> int:
    """A study as the store holds it into ``results_root`` for reading: its study folder (the store's
    copy replaces a local one: the store is where the study lives) and its trial records; the number
    of finished trials. Everything is checked before anything is written; nothing goes into the store."""
    files = []
    for key in store.keys(study):
        target = key_path(results_root / study, key[len(study) + 1:], f"{store.where(study)}/ object")
        data = store.read(key)
        if data is not None:
            if key.endswith(".json"):
                check_json(store.where(key), data)
            files.append((target, data))
    finished = pull_trials(store, study, experiment_dir(results_root, study))
    for target, data in files:
        write_bytes(target, data)
    return len(finished)


def pull_studies(uri: str, names: list[str] | None, results_root: Path) -> dict[str, int]:
    """The studies ``names`` (every study there when None) from the store at ``uri`` into ``results_root``
    for the reading commands; {name: finished trials}. A name the store does not hold is one line."""
    store = open_store(uri)
    store.check()
    held = stored_studies(store)
    for name in names or ():
        if name not in held:
            there = ", ".join(held) if held else "none"
            raise StorageError(f"--storage {uri}: no study {name} there (studies there: {there}); check the name "
                               "and the URI (the one its study.run was given)")
    return {name: bring_down(store, name, results_root) for name in (held if names is None else names)}


def push_search(store: ObjectStore, study: str, database: Path) -> None:
    """A search study's Optuna study (``study`` in the SQLite ``database``, which other studies share) up as
    a database of its own, ``ray/NAME/optuna.db``: a driver elsewhere continues the search from it."""
    # optuna loads for search studies only
    import optuna

    if not database.is_file() or study not in optuna.get_all_study_names(f"sqlite:///{database}"):
        return
    with tempfile.TemporaryDirectory(prefix="rnmt-optuna-") as folder:
        copy = Path(folder) / SEARCH_DB
        optuna.copy_study(from_study_name=study, from_storage=f"sqlite:///{database}", to_storage=f"sqlite:///{copy}")
        store.write(f"{trial_store_prefix(study)}/{SEARCH_DB}", copy.read_bytes())


def pull_search(store: ObjectStore, study: str, database: Path) -> None:
    """The store's copy of a search study's Optuna study into the local ``database``, unless the local one
    has as many trials (it is this machine's own, as new as the store's or newer)."""
    # optuna loads for search studies only
    import optuna

    key = f"{trial_store_prefix(study)}/{SEARCH_DB}"
    data = store.read(key)
    if data is None:
        return
    with tempfile.TemporaryDirectory(prefix="rnmt-optuna-") as folder:
        copy = Path(folder) / SEARCH_DB
        copy.write_bytes(data)
        try:
            stored = len(optuna.load_study(study_name=study, storage=f"sqlite:///{copy}").trials)
        except Exception:  # sqlite's and optuna's errors for a file that is not such a database
            raise StorageError(f"{store.where(key)}: not the Optuna study {study} (damaged or cut short); delete that "
                               "object and run the study with --resume: the search continues without its "
                               "sampler's history") from None
        local = f"sqlite:///{database}"
        if database.is_file() and study in optuna.get_all_study_names(local):
            if len(optuna.load_study(study_name=study, storage=local).trials) >= stored:
                return
            optuna.delete_study(study_name=study, storage=local)
        optuna.copy_study(from_study_name=study, from_storage=f"sqlite:///{copy}", to_storage=local)
