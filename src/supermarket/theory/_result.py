"""The result protocol shared by the small results of :mod:`supermarket.theory`."""

from __future__ import annotations

from dataclasses import asdict

from ..jsonable import to_jsonable


def _frame(rows):
    import pandas as pd

    return pd.DataFrame(rows)


class _Result:
    """The result protocol shared by the small results of this module: ``to_dict()`` (JSON-safe),
    ``to_frame()`` (tidy: one row per quantity, unless a result overrides it) and ``summary()``
    (the plain text the command line prints)."""

    def to_dict(self) -> dict:

        return to_jsonable(asdict(self))

    def to_frame(self):
        """Tidy table: one row per scalar quantity (``quantity``, ``value``)."""
        return _frame([{"quantity": k, "value": v} for k, v in self.to_dict().items()
                       if not isinstance(v, (list, dict))])

    def summary(self) -> str:  # pragma: no cover - every result overrides it
        return "\n".join(f"{k} = {v}" for k, v in self.to_dict().items())


class _PlainResult(_Result):
    """A result whose fields are plain numbers, strings and tuples: ``to_dict()`` is ``asdict``
    unconverted, so that ``Cls(**result.to_dict())`` rebuilds it (``inf`` stays a float);
    :class:`~supermarket.theory.TheoryReport` does so from its stored dict."""

    def to_dict(self) -> dict:
        return asdict(self)
