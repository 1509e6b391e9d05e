"""What a speed benchmark is, for the harness (``_bench.py``) and its workers (``_bench_worker.py``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Bench", "Build", "Noise"]


@dataclass(frozen=True)
class Noise:
    """White noise added to the clean clip, in 8-bit code values whatever the format.

    Attributes
    ----------
    kind : str
        ``"uniform"`` (`level` is the peak-to-peak range) or ``"gaussian"`` (`level` is the
        standard deviation).
    level : float
        Size of the noise in 8-bit code values.
    """

    kind: str
    level: float

    def draw(self, rng, shape: tuple[int, ...], peak: float):
        """Zero-mean noise of `shape` in sample units of a format whose white is `peak`."""
        scale = self.level / 255 * peak
        if self.kind == "uniform":
            return rng.uniform(-scale / 2, scale / 2, shape)
        if self.kind == "gaussian":
            return rng.normal(0.0, scale, shape)
        raise ValueError(f"unknown noise kind {self.kind!r}")

    def describe(self) -> str:
        """The noise as the table header states it."""
        if self.kind == "uniform":
            return f"uniform noise {self.level} codes p-p"
        return f"Gaussian noise sigma {self.level} codes"


#: ``build(core, plugin, case, noisy)`` returns the filtered clip and a note for its cell
#: (how it was run, when that differs between runs), or None.
Build = Callable[[object, str, str, object], tuple[object, str | None]]


@dataclass(frozen=True)
class Bench:
    """One speed benchmark, as the harness runs it.

    Attributes
    ----------
    script : Path
        The benchmark script: workers run it with ``--worker`` and vspipe runs the ``.vpy``
        beside it, which calls :func:`render`.
    title, settings : str
        The table header: ``### {title}, date, GPU, threads, {settings}; cells: ...``.
    cases : mapping
        Case name -> whatever `source` and `build` read of it.
    plugins : sequence of str
        Columns of the table, ``"source"`` (no filter: the harness ceiling) first.
    source : callable
        ``source(core, case)`` returns the (noisy, clean) clips, usually from
        :func:`make_source`.
    build : callable
        See :data:`Build`; raise to mark the cell n/a (the message is printed).
    setup : callable or None
        ``setup(core, plugin, case)``, run in every process before the source is built and
        the clock starts (to load a plugin that is not autoloaded); raise to mark the cell n/a.
    steady_fps : bool
        Report the steady rate, without what a vspipe run pays once (``_bench_worker.py``);
        off, the rate of one vspipe run, first frame included, as the NLM runs were measured.
    """

    script: Path
    title: str
    settings: str
    cases: Mapping[str, object]
    plugins: Sequence[str]
    source: Callable[[object, str], tuple[object, object]]
    build: Build
    setup: Callable[[object, str, str], None] | None = None
    steady_fps: bool = False
