"""The base of the package's result types, :class:`Result`, and small helpers they share: a
plain-text table for ``summary()`` and saving a figure for ``plot(path)``."""

from __future__ import annotations

import json
from dataclasses import asdict, fields, is_dataclass
from typing import Any, ClassVar

from .jsonable import to_jsonable

__all__ = ["Result", "frame", "text_table", "fmt", "save_figure", "pyplot", "human_seconds"]


def frame(rows: Any, **kw: Any) -> Any:
    """``pandas.DataFrame(rows, **kw)`` (pandas imported on first use)."""
    import pandas as pd

    return pd.DataFrame(rows, **kw)


def _plain(v: Any) -> Any:
    """A field's value for ``to_dict``: an object with a ``to_dict()`` (a result, ``Params``) by
    it, another dataclass by ``asdict``, tuples and lists of them element by element."""
    if hasattr(v, "to_dict") and not isinstance(v, type):
        return v.to_dict()
    if is_dataclass(v) and not isinstance(v, type):
        return asdict(v)
    if isinstance(v, (tuple, list)) and any(is_dataclass(x) for x in v):
        return [_plain(x) for x in v]
    return v


class Result:
    """Base of the dataclass results: :meth:`to_dict`, :meth:`to_frame` and :meth:`to_json`
    from the fields.  A subclass declares what differs from the fields, as class attributes:

    ``_omit``
        fields left out of ``to_dict``;
    ``_rename``
        ``{field: key}`` for fields written under another key;
    ``_extra``
        properties (or methods taking no argument) added as keys after the fields, by name
        or as ``{key: attribute}``;
    ``_order``
        keys put first, in this order (the JSON a command prints keeps its layout);
    ``_columns``
        ``{column: attribute}``: ``to_frame()`` is then one row per entry of those
        equal-length arrays (otherwise the tidy ``quantity``/``value`` table of the scalars);
    ``_plain``
        ``to_dict`` keeps the values as they are (no JSON conversion), so that
        ``Cls(**r.to_dict())`` rebuilds the result.

    ``summary()`` and ``plot()`` are written by the results that have them.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Demo(Result):
    ...     x: float
    ...     hidden: int = 0
    ...     _omit = ("hidden",)
    ...     _extra = ("twice",)
    ...     @property
    ...     def twice(self) -> float:
    ...         return 2 * self.x
    >>> Demo(float("inf")).to_dict()
    {'x': 'inf', 'twice': 'inf'}
    >>> Demo(1.5).to_frame().values.tolist()
    [['x', 1.5], ['twice', 3.0]]
    """

    _omit: ClassVar[tuple[str, ...]] = ()
    _rename: ClassVar[dict[str, str]] = {}
    _extra: ClassVar[tuple[str, ...] | dict[str, str]] = ()
    _order: ClassVar[tuple[str, ...]] = ()
    _columns: ClassVar[dict[str, str]] = {}
    _plain: ClassVar[bool] = False

    def _fields_dict(self) -> dict[str, Any]:
        out = {
            self._rename.get(f.name, f.name): _plain(getattr(self, f.name))
            for f in fields(self)  # type: ignore[arg-type]  # every subclass is a dataclass
            if f.name not in self._omit
        }
        extra = self._extra if isinstance(self._extra, dict) else {k: k for k in self._extra}
        for key, name in extra.items():
            v = getattr(self, name)
            out[key] = _plain(v() if callable(v) else v)
        return {**{k: out.pop(k) for k in self._order if k in out}, **out}

    def to_dict(self) -> dict[str, Any]:
        """The fields (as the class declares them) as a JSON-safe dict
        (:func:`supermarket.jsonable.to_jsonable`)."""
        d = self._fields_dict()
        return d if self._plain else to_jsonable(d)

    def to_frame(self) -> Any:
        """A pandas DataFrame: one row per entry of the ``_columns`` arrays, or else one row
        per scalar quantity (``quantity``, ``value``)."""
        if self._columns:
            return frame({c: getattr(self, a) for c, a in self._columns.items()})
        return frame(
            [{"quantity": k, "value": v} for k, v in self.to_dict().items() if not isinstance(v, (list, dict))]
        )

    def to_json(self, **kw: Any) -> str:
        """``to_dict()`` as strict JSON text (keyword arguments go to :func:`json.dumps`)."""
        return json.dumps(to_jsonable(self.to_dict()), allow_nan=False, **kw)


def fmt(x: Any, digits: int = 4) -> str:
    """A number for a table: ``—`` for None, strings as they are, else ``digits`` significant."""
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    return f"{x:.{digits}g}"


def text_table(header: Any, rows: Any, title: str | None = None) -> str:
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


def pyplot(agg: bool = True, *, force: bool = True) -> Any:
    """``matplotlib.pyplot``, imported on first use (the library does not need matplotlib
    until a result is plotted), on the non-interactive Agg backend when ``agg``; with
    ``force=False`` a backend already chosen is kept (``plot(path)`` of a result: Agg to
    write a file, the user's backend to show one)."""
    import matplotlib

    if agg:
        matplotlib.use("Agg", force=force)
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Any) -> Any:
    """Save ``fig`` at ``path`` when given (format by the suffix, PNG without one) and return
    it; the file is written whole or not at all (:func:`supermarket.files.save_figure_atomic`)."""
    if path is not None:
        from .files import save_figure_atomic

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


def class_rows(sc: Any, u: Any, mean_queue_length: Any, sojourn: Any, n: int | None = None, **per_class: Any) -> list:
    """The ``classes`` entries of the results with server classes (exact laws, mean fields): per
    class ``k`` of ``sc`` (a :class:`supermarket.system.service.ServerClasses`) its fraction, speed, servers
    (of ``n``, when given), ``u[k]``, mean queue length and sojourn time, then the ``per_class``
    values' ``k``-th entries.

    Examples
    --------
    >>> from supermarket.system.service import parse_server_classes
    >>> class_rows(parse_server_classes("0.5:2,0.5:1"), [[0.3], [0.6]], [0.4, 1.2], [0.7, 2.0], n=4)[1]
    {'fraction': 0.5, 'speed': 1.0, 'servers': 2, 'u_mean': [0.6], 'mean_queue_length': 1.2, 'sojourn': 2.0}
    """
    return [
        {
            "fraction": sc.fractions[k],
            "speed": sc.speeds[k],
            **({} if n is None else {"servers": int(round(sc.fractions[k] * n))}),
            "u_mean": u[k],
            "mean_queue_length": mean_queue_length[k],
            "sojourn": sojourn[k],
            **{key: v[k] for key, v in per_class.items()},
        }
        for k in range(len(sc.speeds))
    ]


def class_summary(head: str, r: Any, u: Any, U: Any, *, expected: bool = True, little: bool = False) -> str:
    """The ``summary()`` of the results with server classes (exact laws, mean fields): ``head``,
    the totals of ``r`` (``total_mean_queue_length``, ``total_sojourn``), ``U`` (``E[U_ℓ]``, or
    ``U_ℓ`` where not ``expected``), then per class of ``r.server_classes`` its mean queue length,
    sojourn time and first ``u[k]`` (``sojourn (Little's law)`` in the totals where ``little``)."""
    sc = r.server_classes
    e = (lambda x: f"E[{x}]") if expected else (lambda x: x)
    sojourn = "sojourn (Little's law)" if little else "sojourn"
    lines = [
        head,
        f"mean queue length {r.total_mean_queue_length:.10g}; {sojourn} {r.total_sojourn:.10g}",
        f"{e('U_ℓ')}: " + ", ".join(f"{v:.8g}" for v in U[:6]),
    ]
    for k in range(len(sc.speeds)):
        lines.append(
            f"class {sc.fractions[k]:g}:{sc.speeds[k]:g}: mean queue length {r.mean_queue_length[k]:.10g}; "
            f"sojourn {r.sojourn[k]:.10g}; {e('u_ℓ')} " + ", ".join(f"{v:.8g}" for v in u[k, :4])
        )
    return "\n".join(lines)
