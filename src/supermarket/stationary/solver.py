"""The linear algebra shared by the exact solvers (docs/model.md §11): ``π Q = 0`` for a
sparse generator (:func:`stationary_vector`: sparse LU for small systems, GMRES with an
incomplete-LU preconditioner for larger ones) under a wall-clock :class:`Budget`, with the
factorisation run so that Ctrl-C is taken at once (:func:`interruptible`)."""

from __future__ import annotations

import os
import threading
import time as _time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse.linalg as spla

__all__ = ["BudgetExceeded", "Budget", "stationary_vector", "interruptible", "memory_limit", "ILU_THREAD"]

ILU_THREAD = "supermarket-exact-ilu"


class BudgetExceeded(ValueError):
    """The wall-clock budget ``max_seconds`` of an exact solve ran out (a ``ValueError``: the CLI
    prints it in one line and exits 2, as the refusal before work).  The message says the stage
    and what had been reached.

    Examples
    --------
    >>> issubclass(BudgetExceeded, ValueError)
    True
    """


class Budget:
    """A wall-clock budget, checked between the stages of a solve (enumeration, build, each
    factorisation, each GMRES restart, each cap of a search, the post-processing); ``stage``
    also reports the stage to an optional ``progress(text)`` callback.  ``max_seconds=None``:
    no limit (the callback only)."""

    def __init__(self, max_seconds: float | None, what: str, progress: Any = None):
        self.limit = max_seconds
        self.what = what
        self.progress = progress
        self.reached = "nothing solved yet"
        self.t0 = _time.perf_counter()

    def remaining(self) -> float | None:
        return None if self.limit is None else self.limit - (_time.perf_counter() - self.t0)

    def check(self, where: str) -> None:
        if self.limit is None:
            return
        spent = _time.perf_counter() - self.t0
        if spent > self.limit:
            raise BudgetExceeded(
                f"budget: max_seconds = {self.limit:g} s (--max-seconds) ran out after {spent:.3g} s during "
                f"{where} ({self.what}); reached: {self.reached}; a larger --max-seconds, a larger --tol or "
                "a smaller n or --cap"
            )

    def stage(self, where: str) -> None:
        if self.progress is not None:
            self.progress(where)
        self.check(where)


def interruptible(
    fn: Callable[..., Any], *args: Any, _budget: Budget | None = None, _where: str = "", **kw: Any
) -> Any:
    """``fn(*args, **kw)`` in a helper thread, the calling thread waiting in short waits.

    SuperLU's ``spilu`` is one C call that releases the GIL but never checks for signals: run
    directly, Ctrl-C waits until it returns (tens of seconds for 10^5 states).  Here the main
    thread takes the ``KeyboardInterrupt`` at once; the abandoned factorization runs on to its
    end (bounded by ``max_seconds``) and its result is dropped.  The thread is not a daemon:
    an interpreter that exits meanwhile waits for it (a daemon thread inside SuperLU crashes
    the interpreter's finalization); the CLI, which has nothing left to do, exits at once
    (:data:`ILU_THREAD` names it).  The result is the same call's, bit for bit."""
    box: dict = {}
    done = threading.Event()

    def target():
        try:
            box["value"] = fn(*args, **kw)
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
        finally:
            done.set()

    th = threading.Thread(target=target, name=ILU_THREAD, daemon=False)
    th.start()
    # an Event, not Thread.join: a KeyboardInterrupt inside join's lock leaves the thread
    # marked as stopped while it runs on (Python 3.11), and the exit then crashes
    while not done.wait(0.1):
        if _budget is not None:
            _budget.check(_where)  # the factorization runs on, its result dropped (as on Ctrl-C)
    th.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def memory_limit() -> int:
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        phys = 8 * 2**30
    return int(phys // 2)


GMRES_TOL = 1e-15  # |πQ|_2 relative to max|Q_ii| Σπ: GMRES stops below it (see stationary_vector)


class _Converged(Exception):
    def __init__(self, y):
        super().__init__()
        self.y = y


DIRECT_MAX_STATES = 6000  # below this a sparse LU is fastest; above, its fill-in explodes


def stationary_vector(
    Q: Any, tot: np.ndarray, x0: np.ndarray | None = None, budget: Budget | None = None
) -> tuple[np.ndarray, float, str]:
    """``π Q = 0``, ``Σπ = 1``: fix ``π`` at the empty state (rank 0) and solve for the rest.

    Small systems: sparse LU.  Larger ones: GMRES preconditioned by an incomplete LU of the
    matrix with the states ordered by their total number of customers (every event changes
    it by one, so the matrix is block tridiagonal in that order), started from ``x0`` (the
    previous cap's solution) when given.  Returns the law, the residual
    ``max|π Q| / max|Q_ii|`` and the method used.  ``budget`` (a :class:`Budget`) is checked
    before each factorisation, while it runs and after each GMRES restart.
    """
    if budget is None:
        budget = Budget(None, "")
    S = Q.shape[0]
    if S == 1:
        return np.ones(1), 0.0, "trivial"
    A = Q.T.tocsc()
    scale = float(np.abs(Q.diagonal()).max())
    if S <= DIRECT_MAX_STATES:
        budget.stage(f"sparse LU solve of {S:,} states")
        x = spla.spsolve(A[1:, 1:], -np.asarray(A[1:, 0].todense()).ravel())
        pi = np.concatenate(([1.0], np.asarray(x).ravel()))
        method = "sparse LU"
    else:
        order = np.argsort(tot, kind="stable")  # order[0] = 0: the empty state stays first
        B = A[order][:, order].tocsc()
        sub = B[1:, 1:].tocsc()
        rhs = -np.asarray(B[1:, 0].todense()).ravel()
        guess = None
        if x0 is not None:
            g = x0[order] / x0[0]
            guess = g[1:]
        found: str | None = None

        def small_enough(y):
            # GMRES's own test, |r| <= 1e-13 |b|, is out of reach in floating point when the
            # empty state is rare (|y| = 1/π_0 - 1 huge: n = 8, d = 3, λ = 0.9 has π_0 ~ 5e-5,
            # and 3 x 40 restarts took 67 s for 12,870 states); stop instead, after a restart,
            # once the residual is small relative to the scale of the solution
            if np.linalg.norm(sub @ y - rhs) <= GMRES_TOL * scale * (1.0 + np.abs(y).sum()):
                raise _Converged(y)
            budget.check(f"GMRES on {S:,} states")

        for drop, fill in ((1e-2, 5), (1e-3, 10), (1e-4, 20)):
            where = f"incomplete LU (drop {drop:g}) of {S:,} states"
            budget.stage(where)
            ilu = interruptible(
                spla.spilu, sub, drop_tol=drop, fill_factor=fill, permc_spec="NATURAL", _budget=budget, _where=where
            )
            M = spla.LinearOperator(sub.shape, ilu.solve)
            try:
                y, info = spla.gmres(
                    sub,
                    rhs,
                    x0=guess,
                    M=M,
                    rtol=1e-13,
                    atol=0.0,
                    restart=60,
                    maxiter=40,
                    callback=small_enough,
                    callback_type="x",
                )
            except _Converged as stop:
                y, info = stop.y, 0
            if info == 0:
                found = f"GMRES + ILU(drop {drop:g})"
                break
            guess = y
        method = "GMRES + ILU (not converged: see the residual)" if found is None else found
        piperm = np.concatenate(([1.0], y))
        pi = np.empty(S)
        pi[order] = piperm
    pi = np.maximum(pi, 0.0)
    pi /= pi.sum()
    res = float(np.abs(Q.T @ pi).max()) / scale
    return pi, res, method
