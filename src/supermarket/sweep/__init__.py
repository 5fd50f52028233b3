"""Parameter sweeps (docs/sweep.md): a TOML grid of measurements, run locally or on a Dask cluster,
stored as one tidy Parquet table that survives interruption.

Modules: :mod:`.spec` (the sweep file), :mod:`.values` (value checkers), :mod:`.measurements`
(:data:`REGISTRY`), :mod:`.seeds`, :mod:`.execution` (:func:`run_sweep`), :mod:`.storage`
(directory, parts, sidecar, upgrade) and :mod:`.columns` (Arrow tables).
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
