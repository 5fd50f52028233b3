"""Seeds of a sweep (docs/sweep.md, "Seeds"): a task's numbers depend only on the sweep seed and
the task itself (:data:`SEED_RULE`)."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from ..model import spawn_seeds

__all__ = ["task_seed", "canonical_hash", "SEED_RULE"]

SEED_RULE = (
    "grid point root = SeedSequence(seed, spawn_key=(h0, h1)), h0,h1 = first two 32-bit "
    "words of point_hash (SHA-256 of the canonical parameters); replication r = child r"
)


def canonical_hash(obj: object) -> str:
    """SHA-256 (hex) of the canonical JSON of ``obj`` (sorted keys, no blanks, ASCII).

    >>> canonical_hash({"b": 1, "a": [0.5]}) == canonical_hash({"a": [0.5], "b": 1})
    True
    """
    return hashlib.sha256(
        json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    ).hexdigest()


def task_seed(sweep_seed: int, point_hash: str, replication: int) -> np.random.SeedSequence:
    """Seed of replication ``r`` of a grid point (:data:`SEED_RULE`).

    Parameters
    ----------
    sweep_seed : int
        The sweep's (or the block's) seed, >= 0.
    point_hash : str
        The grid point's ``point_hash`` (hex SHA-256 of its canonical parameters).
    replication : int
        The replication ``r >= 0``.

    Returns
    -------
    numpy.random.SeedSequence

    Examples
    --------
    >>> root = np.random.SeedSequence(7, spawn_key=(0xABABABAB, 0xABABABAB))
    >>> task_seed(7, "ab" * 32, 1).generate_state(2).tolist() == root.spawn(2)[1].generate_state(2).tolist()
    True
    """
    h = bytes.fromhex(point_hash[:16])
    root = np.random.SeedSequence(
        int(sweep_seed), spawn_key=(int.from_bytes(h[:4], "big"), int.from_bytes(h[4:], "big"))
    )
    return spawn_seeds(root, replication + 1)[replication]
