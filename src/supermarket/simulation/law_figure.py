"""The figure of ``simulate --plot`` on the engines of service laws and server classes
(``phase``, ``classes``, ``classes-phase``, ``events``): the panels of the profile engines'
figure (:func:`supermarket.simulation.render.plot`) that these results measure, the maximum's
distribution and the trajectory itself taken from the records (``record_every=``,
:mod:`.records`).

1. the time-averaged profile ``1 − E[u_i]`` with ±4.5 s.e. (per class too), and the time
   average of the recorded trajectory (each record weighted by the time to the next: on the
   phase engine's grid in events a record stands for the time until the next one);
2. the maximum queue length: the fraction of time at each value over the records, weighted
   the same way (the profile engines measure it at every event);
3. the recorded ``u_i(t)`` of the first levels against time after the burn-in.

Without records the last two panels say how to get them.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["plot_law", "LEVELS_SHOWN"]

LEVELS_SHOWN = 6
"""Levels of the trajectory panel."""

NO_RECORDS = "no trajectory recorded:\nrun with record_every=\n(--record-every)"


def _profile(ax: Any, res: Any) -> None:
    u = np.asarray(res.u_mean, float)
    lv = np.arange(1, u.size + 1)
    se = np.nan_to_num(np.asarray(res.u_stderr, float), nan=0.0)
    ax.errorbar(lv, 1 - u, yerr=4.5 * se, fmt="o", label="simulated 1 − E[u_i] (±4.5 s.e.)")
    classes = getattr(res, "classes", ()) or ()
    if len(classes) > 1:
        for c in classes:
            cu = np.asarray(c.u_mean, float)
            ax.plot(np.arange(1, cu.size + 1), 1 - cu, ".:", label=f"class {c.fraction:g}:{c.speed:g}")
    tr = res.trajectory
    if tr is not None and len(tr) > 1:
        avg = _weights(tr) @ np.asarray(tr.u, float)[:-1]
        ax.plot(np.arange(1, avg.size + 1), 1 - avg, "s--", mfc="none", label="trajectory, time average")
    ax.set_yscale("log")
    ax.set_xlabel("level i")
    ax.set_ylabel("fraction of queues shorter than i")
    service = getattr(getattr(res, "service", None), "spec", "exp")
    ax.set_title(f"n={res.n}, {res.policy}, λ={res.lam:g}, {service} ({res.engine})", fontsize=9)
    ax.legend(fontsize=7)


def _weights(tr: Any) -> np.ndarray:
    """Each record but the last, weighted by the time to the next (summing to 1)."""
    w = np.diff(np.asarray(tr.t, float))
    return w / w.sum()


def _maximum(ax: Any, tr: Any) -> None:
    ks, where = np.unique(np.asarray(tr.max)[:-1], return_inverse=True)
    ax.bar(ks, np.bincount(where, weights=_weights(tr)), color="tab:blue")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("maximum queue length")
    ax.set_ylabel("fraction of time (over the records)")


def _trajectory(ax: Any, tr: Any) -> None:
    u = np.asarray(tr.u, float)
    for i in range(min(LEVELS_SHOWN, u.shape[1])):
        ax.plot(tr.t, u[:, i], lw=0.7, label=f"u_{i + 1}")
    ax.set_xlabel("time after the burn-in")
    ax.set_ylabel("share of queues with at least i customers")
    ax.set_title(f"trajectory: {len(tr)} records", fontsize=9)
    ax.legend(fontsize=7)


def plot_law(res: Any, path: str | os.PathLike | None = None) -> Any:
    """The three panels of the module docstring for ``res`` (a result of the phase, classes,
    classes-phase or event engine); saved at ``path`` when given (any format matplotlib knows,
    written whole or not at all).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16.5, 4.2))
    _profile(axes[0], res)
    tr = res.trajectory
    if tr is None or len(tr) < 2:
        for ax in axes[1:]:
            ax.text(0.5, 0.5, NO_RECORDS, ha="center", va="center", transform=ax.transAxes)
            ax.set_axis_off()
    else:
        _maximum(axes[1], tr)
        _trajectory(axes[2], tr)
    fig.tight_layout()
    if path is not None:
        from ..files import save_figure_atomic

        save_figure_atomic(fig, path, dpi=120)
    return fig
