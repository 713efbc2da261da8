"""What one run of a study is asked to do: the command line's options, as ``study.runner`` takes them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


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
    data_dir: Path | None = None
    langs: str | None = None
    verbose: bool = False
    command: str = ""
    reuse_from: tuple[str, ...] = ()  # studies whose finished trials this study shares (study.reuse)

    def results_flag(self) -> str:
        """" --results DIR" when it is not the default, for the commands the driver suggests."""
        return f" --results {self.results}" if self.results != Path("results") else ""
