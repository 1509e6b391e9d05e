"""What the warm-up queue did for this process, for ``prewarm`` and the fleet benchmarks.

With ``AVDENOISE_WARMUP_REPORT`` set to a directory, each process appends there one line per
queue outcome to a file named after the outcome and its pid (``compiled-<pid>``,
``waited-<pid>``, ... ; see `avdenoise_vs._warmup.queue`). Nothing here raises, and nothing is
written through a link or into another user's file planted under those names
(``_safefiles.append_line``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Final

from avdenoise_vs._safefiles import append_line

__all__ = ["REPORT_ENV", "record_outcome"]

logger = logging.getLogger("avdenoise_vs._warmup.queue")

REPORT_ENV: Final[str] = "AVDENOISE_WARMUP_REPORT"
"""The environment variable naming the report directory."""


def record_outcome(kind: str, key: int) -> None:
    """Record that the queue's outcome for `key` in this process was `kind`; never raises.

    Parameters
    ----------
    kind : str
        ``compiled`` (under the lock, in this process), ``waited`` (another process compiled
        meanwhile), ``self`` (gave up waiting and compiled), ``warm`` (found the stamp) or
        ``unqueued`` (the queue is off or unusable).
    key : int
        The kernel key, written as 32 lowercase hex digits.
    """
    directory = os.environ.get(REPORT_ENV)
    if not directory:
        return
    try:
        os.makedirs(directory, exist_ok=True)
        append_line(Path(directory, f"{kind}-{os.getpid()}"), f"{key:032x}")
    except OSError as exc:
        logger.debug("cannot write the warm-up report in %s (%s)", directory, exc)
