"""Every shell command and every study file shown in README.md and docs/*.md runs, so an example
cannot rot.

The fenced blocks of the docs are read by their language: ``bash`` blocks hold commands, ``yaml``
blocks a study file (it has a ``name``) or an NMT config, ``python`` blocks code, ``text`` blocks
pictures and output. A block of another language, or of none, fails the test: a command must not hide
in an unlabelled block. Commands and values written inline in prose or tables are references, not
examples, and are not run.

Each bash block runs in a workspace of its own (a temporary directory as the current directory, so
``results/`` and ``runs/`` are the workspace's), command by command as shown, through each command's
own ``main`` in this process (what ``python -m`` and the console scripts call), with these changes:

- ``python -m study.run`` (and ``rnmt-study run``) gets ``--dry-run``: the study file is validated,
  every trial's config built, the data prepared (corpus and SentencePiece, as a real run does) and
  every row's model built, and nothing trains. The dry run's timing of a few training steps per row
  is left out (it measures this machine, not the docs; the dry-run tests time it);
- ``python -m nmt.train`` without ``--smoke`` gets ``--print-config`` (the config and its vocabulary
  are checked, nothing trains); a ``--smoke`` run trains, as shown;
- paths into the repository (``nmt/configs/...``, ``search_spaces/...``) point at the checkout;
- a committed reference study a command names (``results/reference/NAME``, or ``NAME`` for the
  commands that read stored studies: list, table, report, compare) is copied into the workspace first,
  both to ``results/reference/NAME`` and to ``results/NAME`` (standing in for a study you ran), so
  that nothing under the checkout's ``results/`` is written;
- the input files a command reads (``INPUTS``) are made by the test.

A command that cannot run here is listed in ``NOT_RUN`` with the reason; a command that neither runs
nor is listed fails ``test_every_command_in_the_docs_runs_or_is_listed``, and a ``NOT_RUN`` entry
that no command needs any more fails too. Each yaml block is written to a file and checked the same
way: a study file with ``python -m study.run FILE --dry-run``, a config with ``python -m nmt.train
--config FILE --print-config``. Python blocks are compiled and their imports resolved.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import yaml

from nmt.cli import run_main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
REFERENCE = ROOT / "results" / "reference"
LANGUAGES = {"bash", "yaml", "python", "text"}

# The README's two commands, as a new user copies them; CI runs the second (.ci/run).
MAIN_JOB = ("python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && pip install -e . && "
            "python -m study.run ablation_srnmt")
TEST_JOB = ("python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && pip install -e '.[test]' && "
            "python -m pytest -q -n 2")

# (a pattern a command matches, why it is not run). Keep it short: prefer examples that run.
NOT_RUN = [
    (r"^python3 -m venv \.venv$|^\. \.venv/bin/activate$|^pip install ",
     "set-up: creates and installs the environment these tests run in"),
    (r"^python -m pytest( |$)", "the test suite itself, which CI runs (.ci/run)"),
    (r"^git ", "changes the git repository"),
    (r"^(mlflow ui|mlflow server|optuna-dashboard|ray start) ", "starts a server that runs until it is stopped"),
    (r"--storage s3://", "needs an object store (tests/e2e/test_storage.py runs these against S3 on loopback)"),
    (r"HEAD_IP", "needs a Ray cluster (HEAD_IP stands for its head node)"),
    (r"^python -m study\.run .*--(resume|extend)\b", "continues a study that ran before"),
    (r"search_spaces/multi30k/|\.\./shared/data/multi30k", "needs the Multi30k corpus, which a clean clone lacks"),
    (r"^python -m nmt\.bench$", "times every unit and model for minutes; the quick form beside it runs"),
    (r"^python -m study\.(bench|speed)( |$)",
     "times trials or models on a study's corpus (study.bench starts Ray); the speed and bench tests run both"),
]

# Files that the commands of the docs read as their input.
INPUTS = {"source.en": "the old man sees a small dog .\nwe did not read the letters that she wrote .\n"}

READERS = {"study.list", "study.table", "study.report", "study.compare"}  # commands that read stored studies
CONSOLE_SCRIPTS = {"rnmt-study": "main", "rnmt-train": "train", "rnmt-translate": "translate", "rnmt-bench": "bench",
                   "rnmt-analyze": "analyze"}


@dataclass(frozen=True)
class Block:
    doc: str  # path relative to the repository
    line: int  # of the opening fence
    language: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


@dataclass(frozen=True)
class Command:
    where: str  # doc:line
    text: str  # as shown, without its comment, continuation lines joined

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.text)


def read_blocks() -> list[Block]:
    blocks = []
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        start = language = None
        for number, line in enumerate(lines, 1):
            if not line.startswith("```"):
                continue
            if start is None:
                start, language = number, line[3:].strip()
            else:
                text = "\n".join(lines[start:number - 1]) + "\n"
                blocks.append(Block(str(path.relative_to(ROOT)), start, language, text))
                start = None
        assert start is None, f"{path.relative_to(ROOT)}:{start}: a code block is not closed"
    return blocks


BLOCKS = read_blocks()


def commands_of(block: Block) -> list[Command]:
    """The commands of a bash block, one per line (``\\`` continues a line; ``&&`` chains commands)."""
    commands, pending, first = [], "", 0
    for offset, line in enumerate(block.text.splitlines(), 1):
        if not pending:
            first = block.line + offset
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        tokens = shlex.split(pending, comments=True)
        pending = ""
        part: list[str] = []
        for token in [*tokens, "&&"]:
            if token != "&&":
                part.append(token)
            elif part:
                commands.append(Command(f"{block.doc}:{first}", shlex.join(part)))
                part = []
    return commands


def not_run_reason(command: Command) -> str | None:
    return next((reason for pattern, reason in NOT_RUN if re.search(pattern, command.text)), None)


def runnable(command: Command) -> bool:
    argv = command.argv
    return (argv[:2] == ["python", "-m"] and len(argv) > 2) or argv[0] in CONSOLE_SCRIPTS


BASH = [b for b in BLOCKS if b.language == "bash"]
ALL_COMMANDS = [c for b in BASH for c in commands_of(b)]
RUN_BLOCKS = [b for b in BASH if any(not_run_reason(c) is None for c in commands_of(b))]


# ---------------------------------------------------------------------------
# what the docs show


def test_every_block_says_what_it_holds():
    unlabelled = [f"{b.where}: ```{b.language}" for b in BLOCKS if b.language not in LANGUAGES]
    assert not unlabelled, f"label each block with one of {sorted(LANGUAGES)}: {unlabelled}"


def test_every_command_in_the_docs_runs_or_is_listed():
    assert len(ALL_COMMANDS) > 20  # the parser found the docs' commands
    stray = [f"{c.where}: {c.text}" for c in ALL_COMMANDS if not_run_reason(c) is None and not runnable(c)]
    assert not stray, f"commands that neither run here nor are listed in NOT_RUN with a reason: {stray}"
    unused = [pattern for pattern, _ in NOT_RUN if not any(re.search(pattern, c.text) for c in ALL_COMMANDS)]
    assert not unused, f"NOT_RUN entries no command of the docs needs any more: {unused}"


def test_the_readme_keeps_its_two_commands_and_ci_runs_the_second():
    readme = [c for c in ALL_COMMANDS if c.where.startswith("README.md:")]
    lines = [line for b in BASH if b.doc == "README.md" for line in b.text.splitlines()]
    assert MAIN_JOB in lines and TEST_JOB in lines
    # the main job's study is run (as a dry run) by the README's block test; its set-up is listed
    assert any(c.text == "python -m study.run ablation_srnmt" and not_run_reason(c) is None for c in readme)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()[-1]
    assert ci.replace("pip install -q ", "pip install ") == TEST_JOB


def test_the_readme_stays_short_and_the_docs_carry_no_dated_notes():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250
    for path in DOCS:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            # measured numbers live in generated files and under results/, not in dated prose
            assert not re.search(r"\b20\d\d-\d\d-\d\d\b", line), f"{path.relative_to(ROOT)}:{number}: {line}"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, seen = set(), {}
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (match := re.match(r"#{1,6} (.*)", line)):
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_finds_its_file_and_heading(doc):
    text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in anchors(path):
            broken.append(f"{target}: no heading #{anchor} in {path.relative_to(ROOT)}")
    assert not broken, f"{doc.relative_to(ROOT)}: {broken}"


# ---------------------------------------------------------------------------
# running them


@pytest.fixture
def workspace(tmp_path, monkeypatch, cache_dir):
    """A current directory of its own, and dry runs that check everything but do not time rows."""
    from nmt.config import config_from_dict
    from nmt.model import build_model
    from study.execution import dry_run

    def untimed_row(config: dict, corpora: dict | None = None) -> dict:
        cfg = config_from_dict(config, source="dry run")
        model = build_model(cfg.model, cfg.data.spm.vocab_size, cfg.data.spm.vocab_size)
        return {"params": sum(p.numel() for p in model.parameters()), "step_s": 0.0, "valid_s": 0.0,
                "beam_s": 0.0, "steps_per_epoch": 1, "epochs": cfg.train.max_epochs, "test_pairs": 1}

    monkeypatch.setattr(dry_run, "time_row", untimed_row)
    monkeypatch.chdir(tmp_path)
    for name, text in INPUTS.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    threads = torch.get_num_threads()
    yield tmp_path
    torch.set_num_threads(threads)  # a command may set its own; the tests after it keep theirs


def entry_point(argv: list[str]) -> tuple[str, object, list[str]]:
    """(the module or script, its main function, its arguments) of a command."""
    if argv[0] in CONSOLE_SCRIPTS:
        from study import cli

        return argv[0], getattr(cli, CONSOLE_SCRIPTS[argv[0]]), argv[1:]
    module = argv[2]
    return module, importlib.import_module(module).main, argv[3:]


def as_run_here(argv: list[str], workspace: Path) -> tuple[list[str], str | None, str | None]:
    """(the command as it runs here, the file its stdin reads, the file its stdout goes to)."""
    stdin = stdout = None
    args: list[str] = []
    tokens = iter(argv)
    for token in tokens:
        if token == "<":
            stdin = next(tokens)
        elif token == ">":
            stdout = next(tokens)
        elif token.startswith(("nmt/configs/", "search_spaces/")):
            args.append(str(ROOT / token))
        else:
            args.append(token)
    if args[:2] == ["python", "-m"]:
        name = args[2]
    else:
        name = f"rnmt-study {args[1]}" if args[0] == "rnmt-study" and len(args) > 1 else args[0]
    if name in ("study.run", "rnmt-study run") and "--dry-run" not in args:
        args.append("--dry-run")
    if name in ("nmt.train", "rnmt-train") and not {"--smoke", "--print-config"} & set(args):
        args.append("--print-config")
    reader = name in READERS or (name.startswith("rnmt-study ") and f"study.{args[1]}" in READERS)
    for token in args:
        study = token.removeprefix("results/reference/")
        if (REFERENCE / study).is_dir() and study not in ("ray", "analysis") and (token != study or reader):
            for where in (workspace / "results" / "reference" / study, workspace / "results" / study):
                if not where.exists():
                    shutil.copytree(REFERENCE / study, where)
            store = REFERENCE / "ray" / study
            for where in (workspace / "results" / "reference" / "ray" / study, workspace / "results" / "ray" / study):
                if store.is_dir() and not where.exists():
                    shutil.copytree(store, where)
    return args, stdin, stdout


def run_here(command: Command, workspace: Path, capsys, monkeypatch) -> tuple[list[str], str]:
    """(the command as it ran, its output); it must exit with 0."""
    args, stdin, stdout = as_run_here(command.argv, workspace)
    name, main, arguments = entry_point(args)
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((workspace / stdin).read_bytes())))
    takes_argv = bool(inspect.signature(main).parameters)
    assert takes_argv or not arguments, f"{command.where}: {name} takes no arguments"
    try:
        code = run_main(main, arguments) if takes_argv else main()
    except SystemExit as exit_:  # --help
        code = exit_.code or 0
    out, err = capsys.readouterr()
    if stdout is not None:
        (workspace / stdout).write_text(out, encoding="utf-8")
    assert code == 0, f"{command.where}: {shlex.join(args)} exited with {code}\n{out[-3000:]}\n{err[-3000:]}"
    return args, out


def checkout_state() -> tuple[bool, list[str]]:
    """What a command run from the checkout would leave: runs/, and new entries in results/."""
    return (ROOT / "runs").exists(), sorted(p.name for p in (ROOT / "results").iterdir())


@pytest.mark.parametrize("block", RUN_BLOCKS, ids=lambda b: b.where)
def test_the_commands_of_a_block_run(block, workspace, capsys, monkeypatch):
    before = checkout_state()
    for command in commands_of(block):
        if not_run_reason(command) is None:
            args, out = run_here(command, workspace, capsys, monkeypatch)
            if "--dry-run" in args:
                assert "Nothing was trained or written" in out, f"{command.where}: {out[-2000:]}"
    assert checkout_state() == before  # everything went to the workspace


YAML = [b for b in BLOCKS if b.language == "yaml"]


@pytest.mark.parametrize("block", YAML, ids=lambda b: b.where)
def test_a_study_file_or_config_shown_is_valid_as_printed(block, workspace, capsys, monkeypatch):
    content = yaml.safe_load(block.text)
    assert isinstance(content, dict), f"{block.where}: a yaml block holds a study file or a config"
    if "name" in content:  # a study file, named after its file
        path = workspace / f"{content['name']}.yaml"
        argv = ["python", "-m", "study.run", path.name, "--dry-run"]
    else:
        assert set(content) <= {"data", "model", "train", "decode"}, f"{block.where}: neither study file nor config"
        path = workspace / "my.yaml"
        argv = ["python", "-m", "nmt.train", "--config", path.name, "--print-config"]
    path.write_text(block.text, encoding="utf-8")
    _, out = run_here(Command(block.where, shlex.join(argv)), workspace, capsys, monkeypatch)
    assert "Nothing was trained or written" in out or "model:" in out


PYTHON = [b for b in BLOCKS if b.language == "python"]


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.where)
def test_python_shown_compiles_and_imports_what_exists(block):
    tree = ast.parse(block.text, filename=block.where)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module)
            missing = [alias.name for alias in node.names if not hasattr(module, alias.name)]
            assert not missing, f"{block.where}: {node.module} has no {missing}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)


def test_the_architecture_names_every_module_in_its_folder_s_row():
    """docs/architecture.md is where a newcomer looks a module up: every module of nmt/ and study/ is named
    in the table row of its folder (study/'s entry points in the text above its table)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1]: line for line in text.splitlines() if line.startswith("| `")}
    missing = []
    for package in ("nmt", "study"):
        for path in sorted((ROOT / package).rglob("*.py")):
            folder = path.parent.relative_to(ROOT / package).as_posix()
            if path.name == "__init__.py" or "__pycache__" in path.parts:
                continue
            heads = (f"`{package}/`",) if folder == "." else (f"`{folder}/`", f"`{package}/{folder}/`")
            place = next((row for head, row in rows.items() if any(h in head for h in heads)), "")
            place = place or (text if folder == "." else "")
            if f"`{path.name}`" not in place and f"`{folder}/{path.name}`" not in place:
                missing.append(path.relative_to(ROOT).as_posix())
    assert missing == [], f"name these in docs/architecture.md, in their folder's row: {missing}"
