"""A SQLite MLflow store that a killed driver cannot leave half-made.

MLflow builds a new SQLite store with a few dozen schema migrations, which take seconds; a
driver killed among them (kill -9, a power cut) used to leave a store that no later run could
open ("duplicate column name", "table ... already exists"). So a new store is built under a
temporary name next to the database and linked into place only once it is complete.

A store that is there but not at this MLflow's schema version is told apart by what it holds:
one without runs is such a half-made store (from before this module, or from another MLflow
version, holding nothing to lose), which is moved aside and built anew; one with runs is a
user's store of another MLflow version, which is left as it is and refused in one line. Nothing
is deleted but this module's own temporary files: the trial store is the source of truth, and
a study logs its runs again into a new store (``StudyTracker.reconcile``).

Here too: the database file a ``sqlite:///`` URI names, and the file lock that serialises two
drivers' first contact with one new store.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sqlite3
from pathlib import Path

from nmt.errors import UserError

CREATING = ".creating-"  # infix of a store being built: .<name>.creating-<pid>
SET_ASIDE = ".half-made"


def schema_head() -> str | None:
    """The schema version of the installed MLflow (None if this MLflow no longer tells it)."""
    try:
        # MLflow loads when tracking starts (seconds of start-up), not with the checks before it
        from mlflow.store.db.utils import _get_latest_schema_revision
    except ImportError:
        return None
    return _get_latest_schema_revision()


def stored_schema(database: Path) -> tuple[str | None, int]:
    """(the store's schema version or None, how many runs it holds), read without writing, unless a
    driver killed mid-write left a rollback journal beside it: a read-only connection cannot roll that
    back ("attempt to write a readonly database"), so SQLite's own recovery runs first, as MLflow's
    next connection would run it."""
    journal = database.with_name(database.name + "-journal")
    mode = "rw" if journal.is_file() and journal.stat().st_size > 0 else "ro"
    uri = f"{database.resolve().as_uri()}?mode={mode}"
    try:
        with sqlite3.connect(uri, uri=True) as connection:
            tables = {row[0] for row in connection.execute("select name from sqlite_master where type = 'table'")}
            version = None
            if "alembic_version" in tables:
                row = connection.execute("select version_num from alembic_version").fetchone()
                version = row[0] if row else None
            runs = connection.execute("select count(*) from runs").fetchone()[0] if "runs" in tables else 0
    except sqlite3.OperationalError as err:  # a database that cannot be read now (locked, unwritable, I/O)
        raise UserError(f"MLflow store {database} could not be read ({err}); check that no other program holds it "
                        f"and that its folder is writable, or pass --tracking-uri") from None
    except sqlite3.DatabaseError as err:
        raise UserError(f"MLflow store {database} is not a SQLite database ({err}); move it away (the trial store "
                        f"keeps every result, and the study logs its runs again) or pass --tracking-uri") from None
    return version, runs


def ensure_store(database: Path, log=print) -> None:
    """Make ``database`` a complete store of the installed MLflow, or refuse in one line. Called
    under the store's lock (``store_lock``), before MLflow first touches it."""
    database = Path(database)
    for leftover in database.parent.glob(f".{database.name}{CREATING}*"):
        leftover.unlink(missing_ok=True)  # a store a killed driver was building: this module's own file
    head = schema_head()
    if database.exists() and head is not None:
        version, runs = stored_schema(database)
        if version == head:
            return
        if runs:
            raise UserError(f"MLflow store {database} has schema version {version}, not this MLflow's {head}: it comes "
                            f"from another MLflow version, or its upgrade was cut short; back it up and run `mlflow db "
                            f"upgrade sqlite:///{database}`, or move it away (the trial store keeps every result, and "
                            f"the study logs its runs again)")
        aside = _free_name(database.with_name(database.name + SET_ASIDE))
        database.rename(aside)
        log(f"MLflow store {database} was half-made (schema version {version or 'none'}, no runs): moved to "
            f"{aside.name} and built anew")
    if not database.exists():
        _build(database)


def _build(database: Path) -> None:
    """A new store built under a temporary name and linked into place once complete."""
    # MLflow loads when tracking starts (seconds of start-up), not with the checks before it
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    building = database.with_name(f".{database.name}{CREATING}{os.getpid()}")
    level = logging.getLogger("mlflow").level
    logging.getLogger("mlflow").setLevel(logging.WARNING)  # its migrations log at INFO
    try:
        store = SqlAlchemyStore(f"sqlite:///{building}", (database.parent / "mlflow-artifacts").as_uri())
        store.engine.dispose()
        try:
            os.link(building, database)  # never replaces a store that appeared meanwhile
        except FileExistsError:
            pass
    finally:
        logging.getLogger("mlflow").setLevel(level)
        building.unlink(missing_ok=True)


def _free_name(path: Path) -> Path:
    candidate, number = path, 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.name}-{number}")
    return candidate


def sqlite_file(uri: str) -> Path | None:
    """The database file of a SQLite store's URI (None for any other store)."""
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri[len("sqlite:///"):].split("?", 1)[0])


@contextlib.contextmanager
def store_lock(uri: str):
    """Two studies creating the same new SQLite store at once would race on its schema
    migration; a file lock next to the database serialises that first contact."""
    database = sqlite_file(uri)
    if database is None:
        yield
        return
    path = database.with_name(database.name + ".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
