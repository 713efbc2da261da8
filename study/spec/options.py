"""What one run of a study is asked to do: the command line's options, as ``study.execution.driver`` takes them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


def print_line(line: str) -> None:
    """Where a run's progress lines go unless the caller says otherwise: stdout, at once."""
    print(line, flush=True)


@dataclass
class RunOptions:
    results: Path = Path("results")
    resume: bool = False
    extend: bool = False  # with resume: the study may have gained rows, seeds or samples
    fresh: bool = False
    address: str | None = None
    num_cpus: int | None = None
    max_concurrent: int | None = None
    gpus_per_trial: float | None = None
    tracking_uri: str | None = None
    storage: str | None = None  # s3://bucket/prefix: the trial store and exports are mirrored there (study.store.store_mirror)
    data_dir: Path | None = None
    langs: str | None = None
    verbose: bool = False
    command: str = ""
    reuse_from: tuple[str, ...] = ()  # studies whose finished trials this study shares (study.store.reuse)
    say: Callable[[str], None] = field(default=print_line, compare=False, repr=False)  # progress lines

    def results_flag(self) -> str:
        """" --results DIR" when it is not the default, for the commands the driver suggests."""
        return f" --results {self.results}" if self.results != Path("results") else ""
