"""What ``--resume`` and ``--extend`` accept: a stored run of the same study, changed at most by new
rows, seeds, samples or epochs; and the commands the driver suggests to continue a run."""

from __future__ import annotations

from pathlib import Path

from nmt.errors import UserError
from nmt.numerics import PINNING, PINNINGS, arithmetic, arithmetic_pinning, record_arithmetic
from nmt.typed_config import tree_changes
from study.spec.model import SPACES_DIR, StudySpec, Trial, trained_part
from study.spec.options import RunOptions
from study.spec.portable import portable_tree
from study.store.longer_budget import RAISABLE_BUDGETS, budget_grew
from study.store.migration import Move
from study.store.records import trial_record
from study.store.trial_store import TrialStore


def check_resumable(spec: StudySpec, opts: RunOptions, state: dict | None, results_root: Path, exp_dir: Path) -> None:
    """--resume and --extend need a stored run of the study: its trial store, the source of truth.
    A study whose folder (study.json, the tables) was lost continues from its trial store alone."""
    if not exp_dir.is_dir():
        flag = "--extend" if opts.how.extend else "--resume"
        raise UserError(f"study {spec.name}: nothing to {flag[2:]} in {results_root}; run it without {flag}")
    if state is None:
        opts.report.say(f"note: {results_root / spec.name / 'study.json'} is missing; the study continues from its trial "
                 f"store {exp_dir} (the study file given now says what the study is)")


def check_resumable_changes(spec: StudySpec, opts: RunOptions, state: dict | None) -> None:
    """--resume continues the study as it started; --extend lets it gain rows, seeds or epochs.
    Without a stored state (a lost study folder) the trial keys alone decide what is kept."""
    if state is None:
        return
    # compared as any machine sees them: data files by content and base name, no cache
    # directory (a clone elsewhere with the corpus at another path continues the study)
    before = state.get("portable_request") or portable_tree(state.get("request", {}))
    changes = tree_changes(trained_part(before), trained_part(portable_tree(spec.tree)))
    if opts.how.extend:
        check_extension_changes(spec, state, changes)
    elif changes:
        raise UserError(f"study {spec.name}: the study changed since it started ({'; '.join(changes[:3])}); "
                        f"resume with the same file and options, --extend if it only gained rows, seeds or "
                        f"epochs (the finished trials are kept or continued), or start it over with --fresh "
                        f"(or copy the file under a new name to keep both)")


LEGACY_NUMERICS = "native"  # a record from before the setting existed: the CPU's own kernels


def check_numerics(spec: StudySpec, exp_dir: Path) -> None:
    """A study keeps one way of computing (nmt.numerics: the setting, and for portable its pinning), so
    that its rows compare: every finished trial must have computed as this run would."""
    this_run = arithmetic(spec.fields.numerics)
    other = {way: count for way, count in stored_arithmetic(TrialStore(exp_dir)).items() if way != this_run}
    if not other:
        return
    way, count = next(iter(other.items()))
    if way.startswith("portable-") and this_run.startswith("portable-"):  # one setting, two pinnings
        pinned = getattr(arithmetic_pinning(way), "what", "a pinning this version does not know")
        raise UserError(f"study {spec.name}: {count} of its finished trials computed with numerics {way} "
                        f"({pinned}), and this version computes portable with pinning {PINNING} "
                        f"({PINNINGS[PINNING].what}); a study keeps one so that "
                        f"its rows compare: start it over with --fresh, or run it under a new name or --results")
    legacy = " (recorded before the setting existed: the CPU's own kernels)" if way == LEGACY_NUMERICS else ""
    raise UserError(f"study {spec.name}: {count} of its finished trials computed with numerics {way}{legacy}, "
                    f"and this run would use {this_run}; a study keeps one setting so that its rows "
                    f"compare: {setting_to_match(way, spec, 'start it over with --fresh')}")


def stored_arithmetic(store: TrialStore) -> dict[str, int]:
    """How many of a trial store's finished trials computed each way (``arithmetic`` names; a record
    from before the setting existed counts as ``LEGACY_NUMERICS``)."""
    used: dict[str, int] = {}
    for key in store.keys():
        metrics = store.finished_metrics(key)
        if metrics is not None:
            way = record_arithmetic(metrics, LEGACY_NUMERICS)
            used[way] = used.get(way, 0) + 1
    return used


def setting_to_match(way: str, spec: StudySpec, otherwise: str) -> str:
    """How a study comes to compute as the stored arithmetic ``way``: the ``numerics`` setting that gives it,
    where this version has one (a portable record of an older pinning has none), or else ``otherwise``."""
    setting = way.split("-", 1)[0]
    if setting not in ("portable", "native") or arithmetic(setting) != way:
        return f"{otherwise} (no setting of this version computes {way})"
    return f"add `numerics: {setting}` to {spec.source} (or --set numerics={setting}), or {otherwise}"


# what --extend may change in a study: what it varies and how many seeds or samples (the trials'
# own configs are checked by their keys, check_extension), and how the table is labelled
EXTENSIBLE = {"grid": ("grid", "variants", "ablate", "seeds", "table.", "description"),
              "search": ("search.num_samples", "table.", "description")}


def check_extension_changes(spec: StudySpec, state: dict, changes: list[str]) -> None:
    """--extend accepts new rows, seeds or samples, and a grid study's larger counted budget or
    later first epoch for early stopping (study.store.longer_budget); a change of how trials run
    (scheduler, metric, resources, a smaller budget, patience, a search's space) would make old
    and new rows incomparable."""
    search = spec.fields.search is not None
    allowed = EXTENSIBLE["search" if search else "grid"]
    if not search:
        before, after = (state.get("spec") or {}).get("budget") or {}, vars(spec.fields.budget)
        grown = [name for name in RAISABLE_BUDGETS if budget_grew(before, after, name)]
        if "epochs" in grown and spec.fields.scheduler.type == "asha":
            raise UserError(f"study {spec.name}: --extend cannot raise budget.epochs of a study with an ASHA "
                            f"scheduler (its rungs depend on the budget); keep the budget, or start over with --fresh")
        allowed += tuple(f"budget.{name}:" for name in grown)
    other = [change for change in changes if not change.startswith(allowed)]
    if other:
        what = "samples to a search (search.num_samples)" if search else "rows, seeds or epochs"
        raise UserError(f"study {spec.name}: --extend adds {what}, but the study changed otherwise "
                        f"({'; '.join(other[:3])}); undo that, or start over with --fresh (or copy the file under a "
                        f"new name to keep both)")
    if search:
        stored = ((state.get("spec") or {}).get("search") or {}).get("num_samples", 0)  # the effective count
        if spec.fields.search.num_samples < stored:
            raise UserError(f"study {spec.name}: --extend cannot drop samples (search.num_samples {stored} -> "
                            f"{spec.fields.search.num_samples}); raise it, or start over with --fresh")


def resume_command(command: str) -> str:
    """The command that continues an interrupted run: the one that started it (with its --smoke,
    --set, --data-dir, ...) plus --resume, without --fresh."""
    words = [word for word in command.split(" ") if word != "--fresh"]
    if "--resume" not in words and "--extend" not in words:
        words.append("--resume")
    return " ".join(words)


def check_extension(spec: StudySpec, trials: list[Trial], exp_dir: Path, plan: list[Move]) -> None:
    """--extend keeps every stored trial: the changed study must still contain each of them
    (same config and seed, or the same with more epochs, as ``plan`` moves them), so it can
    only have gained rows, seeds or epochs."""

    store = TrialStore(exp_dir)
    wanted = {trial.key for trial in trials}
    moving = {move.old for move in plan}
    dropped = [key for key in store.keys() if key not in wanted and key not in moving]
    if not dropped:
        return
    shown = []
    for key in dropped:
        record = trial_record(store, key)
        shown.append(f"{record['label']} seed {record['seed']}" if record else key)
    shown = sorted(shown)[:3]
    raise UserError(f"study {spec.name}: --extend only adds rows, seeds or epochs, but {len(dropped)} stored trial(s) "
                    f"are no longer in the study ({', '.join(shown)}{', ...' if len(dropped) > 3 else ''}): a changed "
                    f"base config or data, or a budget other than more epochs, changes every trial; undo that, or "
                    f"start over with --fresh (or copy the file under a new name to keep both)")


def study_argument(spec: StudySpec) -> str:
    """How to name the study on the command line again: a built-in by its name, a study file
    outside search_spaces/ by the path it was given as."""
    source = Path(spec.source)
    return spec.name if source.resolve() == (SPACES_DIR / f"{spec.name}.yaml").resolve() else spec.source
