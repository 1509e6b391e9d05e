"""What ``prewarm`` read from the warm-up report of its own process, and how it says it.

The queue writes ``<outcome>-<pid>`` files of kernel keys (`avdenoise_vs._warmup.report`); the
filters per backend come from ``_backends.select.chosen_backends``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from avdenoise_vs._cli._cachedir import spec_summary

__all__ = ["Outcome", "read_outcomes", "summary_lines"]

#: The queue's outcomes, the most telling first: a key seen twice reports the first of these.
OUTCOMES: Final[tuple[str, ...]] = ("compiled", "self", "waited", "unqueued", "warm")
_WORDS: Final[dict[str, str]] = {
    "compiled": "compiled here under the warm-up lock",
    "self": "compiled here after waiting the whole limit for another process",
    "waited": "compiled meanwhile by another process; now warm",
    "unqueued": "compiled without the warm-up queue (off here: AVDENOISE_WARMUP=0, "
    "CUPY_CACHE_IN_MEMORY=1 or no usable cache directory), so no stamp",
    "warm": "already warm (stamp found)",
}


@dataclass(frozen=True)
class Outcome:
    """What the queue did for one kernel key in this process.

    Attributes
    ----------
    key : str
        32 hex digits.
    kind : str
        One of `OUTCOMES`.
    stamp : pathlib.Path or None
        The key's stamp, when it exists now.
    specs : tuple of str
        What the key is for (``_warmup/cache.py``'s ``describe_key``).
    """

    key: str
    kind: str
    stamp: Path | None
    specs: tuple[str, ...]

    @property
    def failed(self) -> bool:
        """Compiled under the lock, yet no stamp: the compile failed, or the stamp's write."""
        return self.kind == "compiled" and self.stamp is None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready values."""
        return {
            "key": self.key,
            "outcome": self.kind,
            "stamp": str(self.stamp) if self.stamp else None,
            "failed": self.failed,
            "specs": list(self.specs),
        }


def _lines(path: Path) -> list[str]:
    """The lines of a report file; none when it is not there."""
    try:
        return path.read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return []


def read_outcomes(report: Path, pid: int) -> list[Outcome]:
    """Read the report of process `pid` in folder `report`: one outcome per kernel key, in
    the order first seen."""
    from avdenoise_vs._warmup import cache as _warmup_cache

    kinds: dict[str, str] = {}
    for kind in OUTCOMES:
        for line in _lines(report / f"{kind}-{pid}"):
            key = line.strip()
            if key and key not in kinds:
                kinds[key] = kind  # OUTCOMES is ordered: the first kind wins
    directory = _warmup_cache.cache_dir()
    outcomes = []
    for key, kind in kinds.items():
        stamp = None if directory is None else directory / f"warm-{key}.stamp"
        if stamp is not None and not stamp.is_file():
            stamp = None
        try:
            specs = _warmup_cache.describe_key(int(key, 16))
        except ValueError:
            specs = ()
        outcomes.append(Outcome(key, kind, stamp, specs))
    return outcomes


def _filters(backends: dict[str, int]) -> str:
    """``3 avdenoise filters (cuda 2, cpu 1)``."""
    total = sum(backends.values())
    each = ", ".join(f"{name} {count}" for name, count in sorted(backends.items()))
    return f"{total} avdenoise filter{'s' if total != 1 else ''} ({each})"


def summary_lines(result: dict[str, Any]) -> list[str]:
    """The text report of a `prewarm.prewarm` result."""
    backends, kernels = result["backends"], result["kernels"]
    lines = []
    if result["error"]:
        lines.append(
            f"prewarm: the script failed, so its later filters were not created:\n{result['error']}"
        )
    if not backends and not result["error"]:
        lines.append("prewarm: no avdenoise filter was created; nothing to compile")
    elif not kernels and backends and set(backends) == {"cpu"}:
        lines.append(
            f"prewarm: nothing needed compiling: {_filters(backends)}, all on the CPU backend "
            "(NumPy), which compiles no kernels"
        )
    elif backends:
        outputs = result["outputs"]
        lines.append(
            f"prewarm: {_filters(backends)}, {outputs} output{'s' if outputs != 1 else ''}; "
            "no frame rendered"
        )
    for kernel in kernels:
        words = _WORDS.get(kernel["outcome"], kernel["outcome"])
        if kernel["outcome"] == "compiled":
            words += "; stamp written" if kernel["stamp"] else "; NO stamp: the compile failed"
        lines.append(f"  {kernel['key']}  {words}")
        lines.extend(f"      {spec_summary(spec)}" for spec in kernel["specs"])
    stamped = {str(Path(k["stamp"]).parent) for k in kernels if k["stamp"]}
    if stamped and result["ok"]:
        lines.append(f"workers now find the stamps in {', '.join(sorted(stamped))}")
    # result["warnings"] stay out of the text: VapourSynth's core already wrote them to
    # stderr (it does whether or not a log handler is installed).
    return lines
