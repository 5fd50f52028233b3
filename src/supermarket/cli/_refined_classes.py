"""``meanfield --server-classes … --n N``: the refined mean field ``π + V/n`` and the linear-noise
covariance of ``√n U`` with server classes (docs/model.md §15.8), in the keys of the one-class
report (``refined``, ``covariance_of``, ``covariance``), with a ``classes`` list in ``refined``."""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["classes_refined_of", "add_classes_refined", "classes_refined_lines"]


def classes_refined_of(d: int, load: Any, server_classes: Any, law: Any, policy: str) -> Any:
    """:func:`supermarket.meanfield.refined_classes.classes_refined_mean_field`, its accuracy
    warnings silenced: they are reported in the block, in words."""
    from ..meanfield.lyapunov import AccuracyWarning
    from ..meanfield.refined_classes import classes_refined_mean_field

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        return classes_refined_mean_field(d, load, server_classes, law, policy=policy)


def add_classes_refined(data: dict, rmf: Any, n: int) -> None:
    """Add ``n``, ``refined`` (the pooled profile ``U``'s block of
    :func:`supermarket.cli._refined.refined_block`, with ``derivative_error`` and per class
    ``classes``: ``V``, ``sum_V``, ``mean``, ``mean_queue_length``, ``sojourn`` by Little's law and
    ``covariance`` of ``√n u_k``), ``covariance_of`` and ``covariance`` (of ``√n U``) to ``data``."""
    import numpy as np

    from ._refined import refined_block

    data["n"] = n
    ref = refined_block(rmf, n, data["mean_queue_length"], True)
    ref["sampling"] = "with replacement (Gast-Van Houdt expansion of the per-class drift, docs/model.md §15.8)"
    ref["derivative_error"] = rmf.derivative_error
    if ref["trusted"]:
        valid = ref["valid_for_n"]
        m = rmf.class_mean(n)
        rows = []
        for k, row in enumerate(data["classes"]):
            q = row["mean_queue_length"] + float(rmf.V_u[k].sum()) / n
            busy = float(m[k, 0])
            rows.append(
                {
                    "fraction": row["fraction"],
                    "speed": row["speed"],
                    "V": rmf.V_u[k].tolist(),
                    "sum_V": float(rmf.V_u[k].sum()),
                    "mean": [float(v) if 0.0 <= v <= 1.0 else None for v in m[k]],
                    "mean_queue_length": q if valid else None,
                    "sojourn": q / (row["speed"] * busy) if valid and busy > 0 else None,
                    "covariance": rmf.class_covariance(k).tolist(),
                }
            )
        ref["classes"] = rows
        ref["sojourn"] = ref["mean_queue_length"] / (rmf.lam * float(np.dot(rmf.f, rmf.s))) if valid else None
    data["refined"] = ref
    data["covariance_of"] = (
        "sqrt(n) (U - π), U the pooled profile (n all servers): linear-noise approximation at the fixed point "
        "(docs/model.md §15.8); per class, sqrt(n) (u_k - π_k) in refined.classes"
    )
    data["covariance"] = rmf.W.tolist() if rmf.accurate else None
    if not rmf.accurate:
        data["covariance_note"] = "not accurate: " + "; ".join(rmf.issues)


def classes_refined_lines(data: dict, n: int) -> list[str]:
    """The text of the block of :func:`add_classes_refined`."""
    ref = data["refined"]
    if not ref["trusted"]:
        return [f"refined mean field at n={n}: not shown, the linear solves lost their accuracy ({ref['reason']})"]
    valid = ref["valid_for_n"]
    out = [
        f"refined mean field at n={n} (Gast–Van Houdt, docs/model.md §15.8): ΣV = {ref['sum_V']:.6g}; "
        + (
            f"refined mean queue length {ref['mean_queue_length']:.10g}, sojourn {ref['sojourn']:.10g}"
            if valid
            else ref.get("note", "π + V/n is no profile at this n")
        ),
        "ℓ   V_ℓ          U_ℓ + V_ℓ/n    sd of √n U_ℓ",
    ]
    cov = data["covariance"]
    for i, (v, m) in enumerate(zip(ref["V"], ref["mean"])):
        sd = "—" if cov is None else f"{max(cov[i][i], 0.0) ** 0.5:.6g}"
        mean = "—" if m is None or not valid else f"{m:.10g}"
        out.append(f"{i + 1:<3d} {v:<12.6g} {mean:<14s} {sd}")
    for row in ref["classes"]:
        head = f"class {row['fraction']:g}:{row['speed']:g}: ΣV = {row['sum_V']:.6g}"
        if valid:
            head += f"; refined mean queue length {row['mean_queue_length']:.10g}, sojourn {row['sojourn']:.10g}"
        out.append(head + "; V_ℓ " + ", ".join(f"{v:.6g}" for v in row["V"][:6]))
    return out
