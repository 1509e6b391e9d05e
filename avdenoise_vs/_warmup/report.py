"""What the warm-up queue did for this process, written for ``scripts/bench/fleet.py``.

With ``AVDENOISE_WARMUP_REPORT`` set to a directory, each process appends there one line per
queue outcome to a file named after the outcome and its pid (``compiled-<pid>``,
``waited-<pid>``, ... ; see `avdenoise_vs._warmup.queue`), and ``<phase> <time.time()>`` lines to
``phases-<pid>`` as a GPU filter's creation reaches its steps. Nothing here raises, and
nothing is written through a link or into another user's file planted under those names
(``_safefiles.append_line``).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Final

from avdenoise_vs._safefiles import append_line

__all__ = ["REPORT_ENV", "record_outcome", "record_phase"]

logger = logging.getLogger("avdenoise_vs._warmup.queue")

REPORT_ENV: Final[str] = "AVDENOISE_WARMUP_REPORT"
"""The environment variable naming the report directory."""


def record_outcome(kind: str, key: int) -> None:
    """Record that the queue's outcome for `key` in this process was `kind`.

    Parameters
    ----------
    kind : str
        ``compiled`` (under the lock, in this process), ``waited`` (another process compiled
        meanwhile), ``self`` (gave up waiting and compiled), ``warm`` (found the stamp) or
        ``unqueued`` (the queue is off or unusable).
    key : int
        The kernel key, written as 32 lowercase hex digits.
    """
    _append(f"{kind}-{os.getpid()}", f"{key:032x}")


def record_phase(name: str) -> None:
    """Note in the report folder (if any) that this process reached `name`, and when.

    The fleet benchmark turns these into where a worker's time to its first frame goes
    (package loaded, CUDA context up, kernels warm) without a profiler on every worker.
    """
    _append(f"phases-{os.getpid()}", f"{name} {time.time():.6f}")


def _append(filename: str, line: str) -> None:
    """Append `line` to `filename` in the report folder; never raises."""
    directory = os.environ.get(REPORT_ENV)
    if not directory:
        return
    try:
        os.makedirs(directory, exist_ok=True)
        append_line(Path(directory, filename), line)
    except OSError as exc:
        logger.debug("cannot write the warm-up report in %s (%s)", directory, exc)
