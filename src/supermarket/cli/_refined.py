"""The ``refined`` block of ``supermarket meanfield --n`` (docs/model.md §3, §13): shared by the
exponential report (:mod:`.meanfield`) and the phase-type one (:mod:`._phase`)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["refined_block"]


def refined_block(rmf: Any, n: int, mql: float, replace: bool) -> dict:
    """The ``refined`` block: ``π + V/n`` at ``n`` with its mean queue length, or why not
    (untrusted, or no profile at this ``n``)."""
    sampling = (
        "with replacement (Gast-Van Houdt expansion of the n-free drift)"
        if replace
        else "without replacement (Gast-Van Houdt expansion, V including the drift's own 1/n term, "
        "docs/model.md §3, derived)"
    )
    if not rmf.accurate:
        # the numbers would be meaningless: say so instead of printing them
        out = {
            "trusted": False,
            "error_estimate": rmf.error_estimate,
            "reason": "; ".join(rmf.issues),
            "sampling": sampling,
        }
    else:
        m = rmf.pi + rmf.V / n
        inside = (m >= 0) & (m <= 1)
        valid = rmf.valid_for(n)  # in [0, 1] and non-increasing: a profile
        out = {
            "trusted": True,
            "error_estimate": rmf.error_estimate,
            "V": rmf.V.tolist(),
            "sum_V": float(rmf.V.sum()),
            # π + V/n outside [0, 1] is no fraction of queues: None
            "mean": [float(v) if ok else None for v, ok in zip(m, inside)],
            "valid_for_n": valid,
            "mean_queue_length": mql + float(rmf.V.sum()) / n if valid else None,
            "sampling": sampling,
        }
        if not valid:
            least = rmf.min_n()
            out["min_n"] = least if math.isfinite(least) else None
            out["note"] = (
                f"π(i) + V_i/n is no profile at n={n} (it leaves [0, 1] or increases with i): n is too "
                "small for the 1/n expansion at this load ("
                + (
                    f"it is a profile from n = {least}; trust it only well above that)"
                    if math.isfinite(least)
                    else "it is no profile at any n)"
                )
            )
    return out
