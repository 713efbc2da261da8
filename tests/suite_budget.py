"""The suite's time budget: the tests allowed to take more than ``SLOW_SECONDS`` are named, each with
its reason, in tests/slow_tests.txt, so that a new slow test is a decision, not an accident.

At the end of every run (tests/conftest.py registers this as a plugin) the terminal summary names
each test whose own time (its call phase) was longer without being listed, and each listed test that
no longer took that long; then the total and the files with the most test time. A shared fixture's
set-up is not charged to whichever test happens to need it first (pytest's --durations lists set-ups
on their own). Nothing fails on a time: a machine's load moves every duration, so the summary informs
and tests/test_suite_hygiene.py checks only that the list names real tests.
"""

from __future__ import annotations

import re
from pathlib import Path

SLOW_SECONDS = 20.0
FILES_SHOWN = 15  # the files with the most test time, in the summary
BUDGET_FILE = Path(__file__).resolve().parent / "slow_tests.txt"
ENTRY = re.compile(r"^(?P<test>tests/\S+\.py::[\w\[\]\-.,]+)\s+#\s*(?P<reason>\S.*)$")


def read_budget(path: Path = BUDGET_FILE) -> dict[str, str]:
    """``{test: reason}``: a test is ``tests/FILE.py::NAME`` (every parametrisation of NAME) or one
    parametrisation ``NAME[ID]``; a line without its ``# reason`` is refused."""
    budget = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = ENTRY.match(line.strip())
        if match is None:
            raise ValueError(f"{path.name}:{number}: expected 'tests/FILE.py::TEST  # why it needs the time', "
                             f"got {line!r}")
        budget[match["test"]] = match["reason"]
    return budget


def listed(nodeid: str, budget: dict[str, str]) -> bool:
    return nodeid in budget or nodeid.split("[", 1)[0] in budget


class SuiteBudget:
    """A pytest plugin: takes each test's call time and reports the tests outside the budget."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report) -> None:
        if report.when == "call":
            self.seconds[report.nodeid] = report.duration

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.seconds:
            return
        budget = read_budget()
        unlisted = sorted(((s, n) for n, s in self.seconds.items() if s > SLOW_SECONDS and not listed(n, budget)),
                          reverse=True)
        longest: dict[str, float] = {}  # per test id and per test name over its parametrisations
        for nodeid, seconds in self.seconds.items():
            for name in (nodeid, nodeid.split("[", 1)[0]):
                longest[name] = max(longest.get(name, 0.0), seconds)
        fast = [name for name in budget if name in longest and longest[name] <= SLOW_SECONDS]
        if unlisted:
            terminalreporter.write_sep("-", f"tests over {SLOW_SECONDS:.0f} s not named in tests/slow_tests.txt")
            for seconds, nodeid in unlisted:
                terminalreporter.write_line(f"{seconds:7.1f} s  {nodeid}")
            terminalreporter.write_line("make each faster, or name it in tests/slow_tests.txt with the reason it needs "
                                        "the time")
        if fast:
            terminalreporter.write_line(f"named in tests/slow_tests.txt but {SLOW_SECONDS:.0f} s or less this run: "
                                        f"{', '.join(fast)}")
        total = sum(self.seconds.values())
        terminalreporter.write_line(f"test time: {total:.0f} s in {len(self.seconds)} tests (their calls, summed over "
                                    f"the workers); over {SLOW_SECONDS:.0f} s: "
                                    f"{sum(s > SLOW_SECONDS for s in self.seconds.values())} tests")
        files: dict[str, float] = {}
        for nodeid, seconds in self.seconds.items():
            files[nodeid.split("::", 1)[0]] = files.get(nodeid.split("::", 1)[0], 0.0) + seconds
        heaviest = sorted(files.items(), key=lambda item: -item[1])[:FILES_SHOWN]
        terminalreporter.write_line("test time by file: " + ", ".join(f"{name.removeprefix('tests/')} {seconds:.0f} s"
                                                                       for name, seconds in heaviest))
