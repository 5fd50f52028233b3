"""One parallel layer: map a function over tasks in this process, a local pool of processes or
threads, or a Dask cluster, with the same results in the same order on every backend, and Ctrl-C
handled once for all callers (docs/sweep.md, "The parallel layer").

Examples
--------
>>> from supermarket.parallel import map_tasks
>>> map_tasks(abs, [-3, 1, -2])
[3, 1, 2]
>>> seen = []
>>> map_tasks(abs, [-3, 1], on_result=lambda i, value, error: seen.append((i, value, error)))
[3, 1]
>>> seen
[(0, 3, None), (1, 1, None)]
>>> out = map_tasks(int, ["1", "x"], return_errors=True)
>>> out[0], type(out[1]).__name__
(1, 'ValueError')
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import re
import signal
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from contextlib import contextmanager, suppress
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # Dask is an optional extra
    from distributed import Client

__all__ = [
    "map_tasks",
    "call",
    "connect",
    "dask_available",
    "default_workers",
    "SchedulerError",
    "stop_requested",
    "check_stop",
    "STOP",
    "BACKENDS",
]

#: Local backends of :func:`map_tasks` (a Dask ``client`` overrides both).
BACKENDS = ("processes", "threads")

ADDRESS = re.compile(r"^(tcp|tls|inproc|ws|wss|ucx)://[^\s/]+$")
# A Dask TCP peer speaks first: an 8-byte length (the handshake's first frames, well under
# this) and then the number of frames.  Anything else is not a Dask scheduler.
_MAX_HANDSHAKE_BYTES = 1 << 26
_MAX_HANDSHAKE_FRAMES = 1 << 16


class SchedulerError(RuntimeError):
    """The Dask scheduler cannot be reached or used (one line: the reason and the remedy).

    Examples
    --------
    >>> issubclass(SchedulerError, RuntimeError)
    True
    """


def default_workers() -> int:
    """The number of CPU cores this process may use (at least 1).

    Returns
    -------
    int
        The size of the CPU affinity set (``os.cpu_count()`` where there is none).

    Examples
    --------
    >>> default_workers() >= 1
    True
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def dask_available() -> bool:
    """True when :mod:`dask.distributed` can be imported (the ``dask`` extra is installed).

    Returns
    -------
    bool

    Examples
    --------
    >>> isinstance(dask_available(), bool)
    True
    """
    import importlib.util

    try:
        return importlib.util.find_spec("distributed") is not None and importlib.util.find_spec("dask") is not None
    except (ImportError, ValueError):
        return False


# =========================================================================== Dask client
#: The longest wait for a scheduler (seconds): beyond about 9e9 s the socket layer overflows.
MAX_TIMEOUT = 1e6


def _probe_tcp(host: str, port: int, timeout: float, address: str) -> None:
    """Check with a plain socket, within ``timeout``, that a Dask peer sends a sane handshake."""
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except (OSError, ValueError) as exc:
        raise SchedulerError(
            f"cannot reach the Dask scheduler at {address} within {timeout:g} s "
            f"({type(exc).__name__}); is `dask scheduler` running there?"
        ) from None
    deadline = time.monotonic() + timeout
    try:
        head = b""
        while len(head) < 16:  # at most 16 reads, all within one deadline
            sock.settimeout(max(deadline - time.monotonic(), 1e-3))
            chunk = sock.recv(16 - len(head))
            if not chunk:
                break
            head += chunk
    except TimeoutError:
        head = None
    except OSError:
        head = b""
    finally:
        sock.close()
    if head is None:
        raise SchedulerError(
            f"{address} accepted the connection but sent no Dask handshake within {timeout:g} s: not a Dask scheduler"
        )
    if len(head) < 16:
        raise SchedulerError(f"{address} closed the connection without a Dask handshake: not a Dask scheduler")
    size, frames = struct.unpack("<QQ", head)
    if not (16 <= size <= _MAX_HANDSHAKE_BYTES and 1 <= frames <= _MAX_HANDSHAKE_FRAMES):
        raise SchedulerError(
            f"{address} answered with something that is not a Dask handshake "
            f"(first bytes {head[:8]!r}): not a Dask scheduler"
        )


def connect(address: str, timeout: float = 5.0) -> Client:
    """A :class:`dask.distributed.Client` connected to the scheduler at ``address``, within about
    ``timeout`` seconds whatever listens there (nothing, another protocol, a silent peer).

    Parameters
    ----------
    address : str
        ``tcp://HOST:PORT`` (or another Dask scheme: ``tls``, ``inproc``, ``ws``, ``wss``, ``ucx``).
    timeout : float
        Seconds to wait, > 0.

    Returns
    -------
    dask.distributed.Client

    Raises
    ------
    SchedulerError
        A malformed address, no ``dask`` extra, no Dask scheduler there, or no answer in time.

    Examples
    --------
    >>> connect("localhost:8786")
    Traceback (most recent call last):
    ...
    supermarket.parallel.SchedulerError: 'localhost:8786' is not a Dask scheduler address like tcp://HOST:PORT
    """
    if not isinstance(address, str) or not ADDRESS.match(address.strip()):
        raise SchedulerError(f"{address!r} is not a Dask scheduler address like tcp://HOST:PORT")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (0 < timeout <= MAX_TIMEOUT):
        raise ValueError(
            f"timeout must be a positive number of seconds, at most {MAX_TIMEOUT:g} (11.6 days); got {timeout!r}"
        )
    address = address.strip()
    try:
        from dask.distributed import Client
    except ImportError as exc:
        raise SchedulerError(
            f"a Dask scheduler needs the 'dask' extra (pip install 'supermarket[dask]'): {type(exc).__name__}: {exc}"
        ) from None
    m = re.match(r"^tcp://(\[[^\]]+\]|[^:]+):(\d+)$", address)
    if m:
        _probe_tcp(m.group(1).strip("[]"), int(m.group(2)), float(timeout), address)
    # Client() itself may hang on a peer that stops answering: bound it by a thread.
    box: dict = {}

    def make() -> None:
        try:
            box["client"] = Client(address, timeout=f"{timeout}s")
        except BaseException as exc:
            box["error"] = exc

    th = threading.Thread(target=make, name="supermarket-dask-connect", daemon=True)
    th.start()
    th.join(timeout + 2.0)
    if th.is_alive() or "error" in box:
        err = box.get("error")
        why = f" ({type(err).__name__})" if err is not None else ""
        raise SchedulerError(
            f"cannot reach the Dask scheduler at {address} within {timeout:g} s{why}; "
            "is `dask scheduler` running there?"
        )
    return box["client"]


# =========================================================================== interruption
STOP = threading.Event()  #: set while a threads map is interrupted: jobs poll it (:func:`stop_requested`)


def stop_requested() -> bool:
    """True when the map running this task (``backend="threads"``) was interrupted.

    Returns
    -------
    bool

    Examples
    --------
    >>> stop_requested()
    False
    """
    return STOP.is_set()


def check_stop() -> None:
    """Raise :class:`KeyboardInterrupt` when :func:`stop_requested` is true.

    Examples
    --------
    >>> check_stop() is None
    True
    """
    if STOP.is_set():
        raise KeyboardInterrupt("stop requested")


@contextmanager
def _sigint_watch():
    """Note in ``watch.fired`` whether SIGINT arrives (then raise as Python does); main thread only.

    SIGTERM is watched too when a Python handler is installed for it (the command line turns
    it into the same clean stop as Ctrl-C); its default action (end the process) is left alone."""
    watch = SimpleNamespace(fired=False)
    if threading.current_thread() is not threading.main_thread():
        yield watch
        return
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        handler_now = signal.getsignal(sig)
        watched = handler_now not in (signal.SIG_IGN, None) if sig == signal.SIGINT else callable(handler_now)
        if watched:
            previous[sig] = handler_now

    def handler(signum, frame):
        watch.fired = True
        before = previous.get(signum)
        if callable(before):
            before(signum, frame)
        raise KeyboardInterrupt

    for sig in previous:
        signal.signal(sig, handler)
    try:
        yield watch
    finally:
        for sig, before in previous.items():
            signal.signal(sig, before)


#: How often a worker process checks that its parent is still alive (seconds).
ORPHAN_POLL_SECONDS = 0.5


def _worker_init(parent_pid: int) -> None:
    """Pool initializer: ignore Ctrl-C (the parent decides); exit when the parent is gone (even SIGKILL-ed).

    SIGTERM keeps its default action: it is how the parent ends a worker (:func:`_terminate`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not a handler inherited from the parent

    def watch():
        while True:
            time.sleep(ORPHAN_POLL_SECONDS)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="supermarket-orphan-watch", daemon=True).start()


def _terminate(pool: cf.Executor) -> None:
    procs = list(getattr(pool, "_processes", {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        with suppress(OSError, ValueError, AttributeError):
            p.terminate()
    for p in procs:
        with suppress(OSError, ValueError, AttributeError, AssertionError):
            p.join(5)


# =========================================================================== the map
def _check_workers(workers: object) -> int:
    if workers is None:
        return default_workers()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1 (or None: all cores); got {workers!r}")
    return workers


def map_tasks(
    fn: Callable[[Any], Any],
    tasks: Iterable[Any],
    *,
    workers: int | None = 1,
    client: Client | None = None,
    backend: str = "processes",
    on_result: Callable[[int, Any, BaseException | None], None] | None = None,
    progress: Callable[[int, int, int], None] | None = None,
    return_errors: bool = False,
    collect: bool = True,
) -> list | None:
    """Apply ``fn`` to every task; results in task order on every backend.

    Parameters
    ----------
    fn : callable
        ``fn(task) -> value``; picklable (module-level) for a pool or a cluster.
    tasks : iterable
        The tasks (plain, picklable data for a pool or a cluster).
    workers : int or None, default 1
        ``1``: in this process; ``N > 1``: a pool of ``min(N, len(tasks))``; ``None``: one per
        CPU core.  Ignored with ``client``.
    client : dask.distributed.Client, optional
        Run the tasks on this cluster (see :func:`connect`).
    backend : {"processes", "threads"}, default "processes"
        The local pool when ``workers > 1``; ``"threads"`` for tasks that release the GIL.
    on_result : callable, optional
        ``on_result(index, value, error)`` in the caller's thread as each task finishes
        (``error``: ``None`` or the task's exception).  An exception it raises stops the map.
    progress : callable, optional
        ``progress(done, running, total)``: before the first task and after each one.
    return_errors : bool, default False
        False: the first task that raises stops the map and its exception is raised.  True:
        the exception takes the task's place (a dead worker process gives ``BrokenProcessPool``).
    collect : bool, default True
        False: keep no results (return ``None``); for callers that store them in ``on_result``.

    Returns
    -------
    list or None
        ``[fn(task) for task in tasks]`` (with exceptions in place when ``return_errors``).

    Raises
    ------
    KeyboardInterrupt
        On Ctrl-C, after stopping the workers; no unfinished task reaches ``on_result``.
    ValueError
        ``workers`` not an integer >= 1 or None, or an unknown ``backend``.

    Examples
    --------
    >>> map_tasks(pow, [])
    []
    >>> done = []
    >>> map_tasks(len, ["ab", "c"], progress=lambda d, r, t: done.append((d, r, t)))
    [2, 1]
    >>> done
    [(0, 1, 2), (1, 1, 2), (2, 0, 2)]
    """
    tasks = list(tasks)
    nw = _check_workers(workers)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}")
    total = len(tasks)
    results: list | None = [None] * total if collect else None

    def deliver(i, value, error):
        if error is not None and not return_errors:
            raise error
        if results is not None:
            results[i] = error if error is not None else value
        if on_result is not None:
            on_result(i, value, error)

    def report(done, running):
        if progress is not None:
            progress(done, running, total)

    if total == 0:
        report(0, 0)
        return results
    if client is not None:
        _run_dask(fn, tasks, client, deliver, report)
    elif min(nw, total) == 1:
        _run_serial(fn, tasks, deliver, report)
    else:
        _run_local(fn, tasks, min(nw, total), deliver, report, backend == "threads")
    return results


def _apply(task):  # (fn, args, kwargs) -> fn(*args, **kwargs)
    return task[0](*task[1], **task[2])


def call(fn: Callable[..., Any], /, *args: Any, client: Client | None = None, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, here or as one task on a Dask cluster; the same value either way.

    Parameters
    ----------
    fn : callable
        A module-level function (pickled by reference for the cluster).
    *args, **kwargs
        Its arguments (picklable); ``client`` is never passed on.
    client : dask.distributed.Client, optional
        Run on this cluster (see :func:`connect`); ``None``: in this process.

    Returns
    -------
    object
        What ``fn`` returns.

    Raises
    ------
    Exception
        Whatever ``fn`` raises; :class:`SchedulerError` when the cluster has no workers.

    Examples
    --------
    >>> call(divmod, 17, 5)
    (3, 2)
    >>> call(sorted, [3, 1, 2], reverse=True)
    [3, 2, 1]
    """
    if client is None:
        return fn(*args, **kwargs)
    results = map_tasks(_apply, [(fn, args, kwargs)], client=client)
    assert results is not None  # collect=True
    return results[0]


def _run_serial(fn, tasks, deliver, report):
    total = len(tasks)
    report(0, 1)
    with _sigint_watch() as watch:
        for i, task in enumerate(tasks):
            try:
                value, error = fn(task), None
            except Exception as exc:
                value, error = None, exc
            if watch.fired:  # the task may have swallowed Ctrl-C and returned a partial value
                raise KeyboardInterrupt("interrupted while a task was running")
            deliver(i, value, error)
            report(i + 1, 0 if i + 1 == total else 1)


def _run_local(fn, tasks, nw, deliver, report, threads):
    """Run the tasks on a local pool of ``nw`` threads or processes; deliver them as they finish."""
    pool: cf.Executor
    if threads:
        pool = cf.ThreadPoolExecutor(max_workers=nw, thread_name_prefix="supermarket-task")
    else:
        import multiprocessing as mp

        pool = cf.ProcessPoolExecutor(
            max_workers=nw, mp_context=mp.get_context("spawn"), initializer=_worker_init, initargs=(os.getpid(),)
        )
    total = len(tasks)
    try:
        futs = {pool.submit(fn, t): i for i, t in enumerate(tasks)}
        report(0, min(nw, total))
        for done, fut in enumerate(cf.as_completed(futs), start=1):
            try:
                value, error = fut.result(), None
            except Exception as exc:
                value, error = None, exc
            deliver(futs[fut], value, error)
            report(done, min(nw, total - done))
    except BaseException:
        # Ctrl-C or a failing task: threads see stop_requested() and return after their current
        # kernel call (the queued ones are cancelled); processes are terminated at once
        if not threads:
            _terminate(pool)
            raise
        STOP.set()
        try:
            pool.shutdown(wait=True, cancel_futures=True)
        finally:
            STOP.clear()
        raise
    pool.shutdown(wait=True)


def _run_dask(fn, tasks, client, deliver, report):
    from dask.distributed import wait

    nthreads = _cluster_threads(client)
    if not nthreads:
        raise SchedulerError("the Dask scheduler has no workers; start some with `dask worker ADDRESS`")
    token = uuid.uuid4().hex[:12]
    name = getattr(fn, "__name__", "task")
    futs = [client.submit(fn, t, key=f"supermarket-{name}-{token}-{i}", pure=False) for i, t in enumerate(tasks)]
    index = {f.key: i for i, f in enumerate(futs)}
    total = len(tasks)
    pending = set(futs)
    idle_since = None
    try:
        done = 0
        report(0, min(nthreads, total))
        while pending:
            try:
                finished = wait(pending, timeout=DASK_POLL_SECONDS, return_when="FIRST_COMPLETED").done
            except TimeoutError:  # nothing finished in this poll
                finished = set()
            except BaseException as exc:
                if not isinstance(exc, (KeyboardInterrupt, SystemExit)) and "Cancelled" in type(exc).__name__:
                    # FuturesCancelledError: "scheduler-connection-lost"
                    raise SchedulerError(_lost_scheduler(client)) from None
                raise
            for fut in sorted(finished, key=lambda f: index[f.key]):
                pending.discard(fut)
                if fut.status == "cancelled":
                    # the scheduler went away (or cancelled our work): not a failure of the task
                    raise SchedulerError(_lost_scheduler(client))
                try:
                    value, error = fut.result(), None
                except Exception as exc:
                    value, error = None, exc
                deliver(index[fut.key], value, error)
                done += 1
                report(done, min(nthreads, total - done))
            if finished:
                idle_since = None
                continue
            # nothing finished: are there still workers to run the pending tasks?
            nthreads = _cluster_threads(client)
            if nthreads:
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > NO_WORKERS_GRACE_SECONDS:
                raise SchedulerError(
                    f"the Dask cluster has had no workers for {NO_WORKERS_GRACE_SECONDS:g} s ({len(pending)} of "
                    f"{total} tasks not run); the finished ones are kept: start workers (`dask worker "
                    f"{_address(client)}`) and run the same command again to resume"
                )
    except BaseException:
        with suppress(Exception):
            client.cancel(futs)
        raise


#: How often the Dask loop checks the cluster while no task finishes (seconds).
DASK_POLL_SECONDS = 2.0
#: A cluster without workers for this long ends the run with :class:`SchedulerError`.
NO_WORKERS_GRACE_SECONDS = 30.0


def _address(client: Client) -> str:
    return str(getattr(getattr(client, "scheduler", None), "address", None) or "ADDRESS")


def _lost_scheduler(client: Client) -> str:
    return (
        f"lost the Dask scheduler {_address(client)} mid-run (it stopped or the connection broke); "
        "the finished tasks are kept: restart it and run the same command again to resume"
    )


def _cluster_threads(client: Client) -> int:
    """Worker threads of the cluster now; :class:`SchedulerError` when the scheduler is gone."""
    try:
        return sum(client.nthreads().values())
    except Exception as exc:
        raise SchedulerError(_lost_scheduler(client)) from exc
