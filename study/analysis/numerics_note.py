"""The note under a table that says where its numbers hold: the numerics its trials computed with
(nmt.numerics), read from their records."""

from __future__ import annotations

from nmt.numerics import arithmetic_pinning, record_arithmetic

LEGACY = "native"  # a record from before the setting existed computed with the CPU's own kernels


FINAL = ("ok", "truncated", "diverged")  # statuses whose record holds the trial's final metrics


def computed(records: list[dict]) -> list[dict]:
    """The records that say how their trial computed: those with the setting, and trials that ended with their
    final metrics from before it existed (LEGACY); a trial still running, stopped or failed keeps only its
    progress, which names none."""
    return [r for r in records if isinstance(r.get("metrics"), dict)
            and (r["metrics"].get("numerics") or r.get("status", "ok") in FINAL)]


def records_numerics(records: list[dict]) -> str | None:
    """The one numerics setting the records computed with; None when they have none or mix them."""
    settings = {str(r["metrics"].get("numerics") or LEGACY) for r in computed(records)}
    return settings.pop() if len(settings) == 1 else None


def numerics_note(records: list[dict]) -> str:
    """One sentence for the table's notes (two when trials ran on the Triton kernels); empty without records."""
    return " ".join(part for part in (_setting_sentence(records), _kernels_sentence(records)) if part)


def _kernels_sentence(records: list[dict]) -> str:
    """Trials whose recurrences ran on the opt-in Triton kernels (nmt.ops.kernels) match the default
    torch paths to rounding, not bit for bit; records without the field ran on torch."""
    metrics = [r["metrics"] for r in records if isinstance(r.get("metrics"), dict)]
    on_triton = sum(str(m.get("kernels") or "torch") == "triton" for m in metrics)
    if not on_triton:
        return ""
    which = "all trials" if on_triton == len(metrics) else f"{on_triton} of {len(metrics)} trials"
    return (f"kernels: Triton ({which}, NMT_KERNELS=triton): their recurrences equal the default torch paths to "
            "rounding, not bit for bit.")


def _setting_sentence(records: list[dict]) -> str:
    records = computed(records)
    metrics = [r["metrics"] for r in records]
    ways = sorted({record_arithmetic(m, LEGACY) for m in metrics})
    if not ways:
        return ""
    if len(ways) == 1 and ways[0].startswith("portable-"):
        return _portable_sentence(ways[0])
    if ways == ["native"]:
        cpus = sorted({str(r.get("cpu") or r["metrics"].get("cpu")) for r in records
                       if r.get("cpu") or r["metrics"].get("cpu")})
        where = f" ({'; '.join(cpus)})" if cpus else ""
        return (f"numerics: native, each CPU's own kernels{where}: another CPU type can train the same seeds to "
                "other numbers.")
    counts = ", ".join(f"{sum(record_arithmetic(m, LEGACY) == way for m in metrics)} {way}" for way in ways)
    return f"numerics: mixed ({counts} trials): rows trained under different settings compare less exactly."


def _portable_sentence(way: str) -> str:
    """Where portable numbers hold: the CPUs their pinning was verified on (nmt.numerics.PINNINGS), and
    no more."""
    number = way.removeprefix("portable-")
    pinning = arithmetic_pinning(way)
    if pinning is None:
        return (f"numerics: portable, pinning {number}, which this version does not know: where its numbers hold "
                "is not said.")
    sentence = (f"numerics: portable, pinning {number} ({pinning.what}), one thread per trial: verified to give the "
                f"same numbers from the same seeds on {'; '.join(pinning.verified_on)}")
    if pinning.differs_on:
        sentence += f"; {' and '.join(pinning.differs_on)} computed other numbers under it"
    return sentence + "."
