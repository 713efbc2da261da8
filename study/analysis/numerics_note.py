"""The note under a table that says where its numbers hold: the numerics its trials computed with
(nmt.numerics), read from their records."""

from __future__ import annotations

LEGACY = "native"  # a record from before the setting existed computed with the CPU's own kernels


def records_numerics(records: list[dict]) -> str | None:
    """The one numerics setting the records computed with; None when they have none or mix them."""
    settings = {str(r["metrics"].get("numerics") or LEGACY) for r in records if isinstance(r.get("metrics"), dict)}
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
    settings = sorted({str(r["metrics"].get("numerics") or LEGACY) for r in records if isinstance(r.get("metrics"), dict)})
    if not settings:
        return ""
    if settings == ["portable"]:
        return ("numerics: portable (ATen and MKL pinned to AVX2): the same seeds give these numbers on any x86-64 CPU "
                "with AVX2, at one thread per trial.")
    if settings == ["native"]:
        cpus = sorted({str(r.get("cpu") or r["metrics"].get("cpu")) for r in records
                       if r.get("cpu") or r["metrics"].get("cpu")})
        where = f" ({'; '.join(cpus)})" if cpus else ""
        return (f"numerics: native, each CPU's own kernels{where}: another CPU type can train the same seeds to "
                "other numbers.")
    counts = ", ".join(f"{sum(str(r['metrics'].get('numerics') or LEGACY) == s for r in records)} {s}" for s in settings)
    return f"numerics: mixed ({counts} trials): rows trained under different settings compare less exactly."
