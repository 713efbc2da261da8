"""How progress lines show a duration: ``7m05s``, and ``1h07m05s`` from one hour on (a study on
real data runs for hours; ``187m05s`` would make the reader do the division)."""

from __future__ import annotations


def clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"
