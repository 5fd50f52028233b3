"""A wall-clock budget over a whole command (``design --max-seconds``): every stage, the
library's searches and fits, a simulation and a cluster's wait included."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any, Literal

from ._common import FloatType


class _Seconds(FloatType):
    """A positive finite number of seconds (``--max-seconds``)."""

    def convert(self, value, param, ctx):
        x = super().convert(value, param, ctx)
        if not x > 0:
            self.fail(f"--max-seconds must be a positive number of seconds; got {str(value)[:40]!r}", param, ctx)
        return x


SECONDS = _Seconds()


class _OutOfTime(KeyboardInterrupt):
    """Raised in the main thread by the budget's alarm.  A ``KeyboardInterrupt``, so that every
    stop path made for Ctrl-C runs (threads told to stop, worker pools ended, a cluster's
    futures cancelled), and no ``except ValueError`` / ``except Exception`` of the library (a
    search that counts a failed evaluation as a miss) takes it for a result.  A path that
    catches the interrupt and goes on with a partial result is stopped again every
    :data:`REPEAT_SECONDS`, and its result is dropped: once the alarm fired, the block ends
    with the budget's error."""


#: After the budget ran out, the alarm repeats this often until the block has ended.
REPEAT_SECONDS = 0.5


class WallBudget:
    """``max_seconds`` of wall time for the block, from an interval timer (``SIGALRM``, main
    thread); when it runs out the block raises ``ValueError`` (the CLI's one line, exit 2) with
    the words of ``exact --max-seconds``'s budget and the stage set last (:meth:`stage`).

    A long call in C (one kernel call, one factorisation) ends before the alarm is taken, as
    for Ctrl-C.  Where there is no ``setitimer`` or not the main thread, no limit is kept.

    Examples
    --------
    >>> with WallBudget(60.0, "design") as b:
    ...     b.stage("the mean-field search")
    >>> b.where
    'the mean-field search'
    """

    def __init__(self, max_seconds: float, what: str, fix: str = "a larger --max-seconds"):
        self.limit = float(max_seconds)
        self.what = what
        self.fix = fix
        self.where = "the start (loading the library)"
        self._t0 = time.monotonic()
        self._armed = False
        self._closing = False
        self.fired = False
        self._previous: Any = None

    def stage(self, where: str) -> None:
        """Name the stage that runs now (the message names it when the time runs out)."""
        self.where = str(where)

    def _alarm(self, signum: int, frame: object) -> None:
        if not self._closing:  # the block has ended: its result stands
            self.fired = True
            raise _OutOfTime

    def __enter__(self) -> WallBudget:
        self._t0 = time.monotonic()
        if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGALRM, self._alarm)
            signal.setitimer(signal.ITIMER_REAL, self.limit, REPEAT_SECONDS)
            self._armed = True
        return self

    def _disarm(self) -> None:
        if self._armed:
            signal.setitimer(signal.ITIMER_REAL, 0.0)
            signal.signal(signal.SIGALRM, self._previous)
            self._armed = False

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> Literal[False]:
        self._closing = True
        self._disarm()
        if self.fired:  # whatever the block did with the interrupt (a partial result), it is dropped
            spent = time.monotonic() - self._t0
            raise ValueError(
                f"budget: max_seconds = {self.limit:g} s (--max-seconds) ran out after {spent:.3g} s during "
                f"{self.where} ({self.what}); {self.fix}"
            ) from None
        return False
