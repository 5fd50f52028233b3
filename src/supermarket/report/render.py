"""A rendered figure of a sweep report (:class:`Figure`: name, title, caption and PNG bytes) and
the rendering shared by the figure makers (matplotlib's Agg backend, PNG at 110 dpi)."""

from __future__ import annotations

import io
from dataclasses import dataclass

from ..result import pyplot as _plt

__all__ = ["Figure"]


@dataclass
class Figure:
    """A rendered figure: ``name`` (file stem), ``title``, ``caption`` and PNG bytes.

    Examples
    --------
    >>> Figure("mixing", "Mixing", "Coalescence times.", b"").name
    'mixing'
    """

    name: str
    title: str
    caption: str
    png: bytes


def _fig_to_png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


def _finish(fig, ax, *, xlabel, ylabel, title, name, heading, caption, which="major", legend_size=8) -> Figure:
    """Label, grid, legend and title one-axis figures the same way; render to a :class:`Figure`."""
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3, which=which)
    ax.legend(fontsize=legend_size)
    ax.set_title(title, fontsize=10)
    return Figure(name, heading, caption, _fig_to_png(fig))
