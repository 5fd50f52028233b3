"""Parameter sweeps: a TOML grid of measurements, run locally or on a Dask cluster, stored
as one tidy Parquet table that survives interruption.

The parts, one module each:

1. **Sweep file** (:mod:`.spec`, :func:`load_sweep`): TOML read with :mod:`tomllib`,
   validated in full before anything runs; every error is listed at once with its line and
   key (:class:`SweepFileError`).  The grid expands into *tasks*: one task is one grid point
   and one replication, and gives one row of the results table.  Value checkers
   (:mod:`.values`) use the library's own enumerations.
2. **Measurements** (:mod:`.measurements`): one :class:`Measurement` per measurement
   (``theory``, ``meanfield``, ``simulate``, ``mixing``, ``fluctuations``): its keys, their
   rules, and an adapter taking a task's parameters and a
   :class:`numpy.random.SeedSequence`.  Adding one is one entry of ``REGISTRY``.
3. **Seeds** (:mod:`.seeds`): a grid point's root seed is
   ``SeedSequence(sweep_seed, spawn_key=(h0, h1))`` with ``h0, h1`` two 32-bit words of the
   SHA-256 of its canonical parameters; replication ``r`` is child ``r`` of that root.  A
   task's numbers depend only on the sweep seed and the task itself.
4. **Execution** (:mod:`.execution`, :func:`run_sweep`): through :mod:`supermarket.parallel`,
   in this process (``workers=1``), a local process pool, or an existing Dask cluster
   (``scheduler="tcp://host:port"``, the only part that needs the ``dask`` extra).  A
   failing task is recorded with its error and the others go on; an interrupted one is never
   stored.
5. **Storage** (:mod:`.storage`): the directory is created atomically; each finished task is
   written to its own part file, checked against its task when read back; the parts are
   consolidated, again atomically, into ``results.parquet`` with Arrow list and map columns
   for arrays (:mod:`.columns`).  Running the same command again resumes; a kill at any instant leaves a
   directory that the same command resumes.  ``sweep.json`` (the sidecar) records the
   package version, the git commit, the sweep file's text and hashes, the seeds and timings.
"""

from __future__ import annotations

from ..parallel import SchedulerError
from .execution import SweepOutcome, run_sweep, run_task
from .measurements import DETERMINISTIC as DETERMINISTIC  # re-exported, not in __all__
from .measurements import MEASUREMENT_KEYS, MEASUREMENTS, REGISTRY, Measurement
from .seeds import task_seed
from .spec import FORMAT_VERSION as FORMAT_VERSION  # re-exported, not in __all__
from .spec import Sweep, SweepFileError, Task, load_sweep, parse_sweep
from .storage import ID_COLUMNS as ID_COLUMNS  # the file layout, re-exported, not in __all__
from .storage import PARTS_DIR as PARTS_DIR
from .storage import RESULTS_FILE as RESULTS_FILE
from .storage import SIDECAR_FILE as SIDECAR_FILE
from .storage import SWEEP_COPY as SWEEP_COPY
from .storage import TIMING_COLUMNS, OutputError, SweepDirError, read_results, read_sidecar, table_rows, upgrade

__all__ = [
    "SweepFileError",
    "Task",
    "Sweep",
    "MEASUREMENTS",
    "MEASUREMENT_KEYS",
    "REGISTRY",
    "Measurement",
    "load_sweep",
    "parse_sweep",
    "task_seed",
    "run_task",
    "run_sweep",
    "SweepOutcome",
    "read_results",
    "read_sidecar",
    "table_rows",
    "upgrade",
    "TIMING_COLUMNS",
    "SweepDirError",
    "SchedulerError",
    "OutputError",
]
