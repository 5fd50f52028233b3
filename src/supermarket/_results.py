"""Small helpers shared by the result types of :mod:`supermarket.mixing`,
:mod:`supermarket.fluctuations`, :mod:`supermarket.report` and the experiments: the one
across-replication mean / standard-error estimator, a plain-text table for ``summary()``
and saving a figure for ``plot(path)``.

:func:`mean_stderr` is a thin adapter over :func:`supermarket.stats.replication_error`, the
package's one across-replication estimator (Student t on ``R − 1`` degrees of freedom); only
its column-wise form for 2-d input is computed here, with the same formula.
"""

from __future__ import annotations

import math

import numpy as np

from .stats import replication_error

__all__ = ["mean_stderr", "text_table", "fmt", "save_figure", "pyplot", "human_seconds"]


def mean_stderr(values, axis: int = 0):
    """Mean over independent replications and its standard error ``s/√R`` (``ddof=1``).

    Parameters
    ----------
    values : array_like
        Replications along ``axis`` (``None`` entries of a 1-d list are dropped).
    axis : int, default 0

    Returns
    -------
    (mean, stderr)
        Floats for 1-d input, arrays otherwise; ``stderr`` is ``None`` with fewer than two
        replications; ``(None, None)`` for no replication.

    Examples
    --------
    >>> m, se = mean_stderr([1.0, 2.0, 3.0])
    >>> m, round(se, 12)
    (2.0, 0.57735026919)
    >>> mean_stderr([4.0])
    (4.0, None)
    """
    if isinstance(values, (list, tuple)) and all(np.ndim(v) == 0 for v in values):
        values = [v for v in values if v is not None]
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return None, None
    if x.ndim == 1 and np.all(np.isfinite(x)):
        e = replication_error(x)
        return e.mean, (e.stderr if x.size > 1 else None)
    # column by column (or with non-finite entries, which replication_error refuses and
    # which must propagate as NaN/inf here): the same estimator, s/√R with ddof=1
    R = x.shape[axis]
    mean = x.mean(axis=axis)
    se = x.std(axis=axis, ddof=1) / math.sqrt(R) if R > 1 else None
    if x.ndim == 1:
        return float(mean), (None if se is None else float(se))
    return mean, se


def fmt(x, digits: int = 4) -> str:
    """A number for a table: ``—`` for None, strings as they are, else ``digits`` significant."""
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    return f"{x:.{digits}g}"


def text_table(header, rows, title: str | None = None) -> str:
    """A plain-text table (columns padded; the first left-aligned, the others right).

    Examples
    --------
    >>> print(text_table(["x", "y"], [["a", "1"], ["bb", "22"]], title="T"))
    T
    x    y
    --  --
    a    1
    bb  22
    """
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    w = [max(len(r[j]) for r in cells) for j in range(len(header))]
    w = [max(x, 2) for x in w]

    def line(r):
        return "  ".join(c.ljust(w[j]) if j == 0 else c.rjust(w[j]) for j, c in enumerate(r)).rstrip()

    out = ([title] if title else []) + [line(cells[0]), "  ".join("-" * x for x in w)]
    out += [line(r) for r in cells[1:]]
    return "\n".join(out)


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (imported on first use: the
    library does not need matplotlib until a result is plotted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path):
    """Save ``fig`` at ``path`` when given (format by the suffix, PNG without one) and return
    it; the file is written whole or not at all (:func:`supermarket._files.save_figure_atomic`)."""
    if path is not None:
        from ._files import save_figure_atomic

        save_figure_atomic(fig, path, dpi=110, bbox_inches="tight")
    return fig


def human_seconds(s: float) -> str:
    """A duration for a message: ``"45 s"``, ``"12 min"``, ``"3.0 h"``, ``"9 days"``, ``"2 years"``.

    Examples
    --------
    >>> human_seconds(90), human_seconds(5400)
    ('90 s', '90 min')
    """
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    if s < 2 * 365 * 86400:
        return f"{s / 86400:.0f} days"
    return f"{s / (365 * 86400):.3g} years"
