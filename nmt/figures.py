"""Figures drawn with matplotlib's object-oriented API, never through pyplot: a notebook or script
that imports this package keeps its own backend, its open figures and its rc settings.

``subplots`` makes a ``matplotlib.figure.Figure`` on its own Agg canvas, and its axes;
``literal_text`` draws a figure with math parsing off only while it draws, so a label from a study
file is shown as written ("$\\textbf{GRU}$" is text, not a formula that mathtext cannot parse)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


def subplots(*grid: int, figsize: tuple[float, float], **options) -> tuple[Any, Any]:
    """(figure, axes) as ``pyplot.subplots(*grid, figsize=..., **options)`` gives them, without pyplot."""
    # matplotlib loads with the first figure: commands that draw none start faster
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=figsize)
    FigureCanvasAgg(figure)  # this figure's own canvas (text extents, PNG and PDF); no global backend
    return figure, figure.subplots(*grid, **options)


def literal_text(draw: Callable) -> Callable:
    """``draw`` run with matplotlib's ``text.parse_math`` off, and the setting restored after it."""
    @functools.wraps(draw)
    def drawing(*args, **kwargs):
        # matplotlib loads with the first figure: commands that draw none start faster
        import matplotlib

        with matplotlib.rc_context({"text.parse_math": False}):
            return draw(*args, **kwargs)

    return drawing
