"""Timing the CUDA backend alone, as the bridge drives it: threads, GIL-held time, kernel time.

Shared by ``gpu_check.py`` and ``gpu_bm3d_check.py``. Host frames come from a pool of
distinct frames with padded rows, as VapourSynth's are; every rate is frames per second of
``CudaBackend.process``.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "cuda"))

from _clips import new_dst, view

__all__ = ["gil_held_us", "gpu_ms", "throughput"]


class _FramePool:
    """Distinct host frames reused cyclically; frame f shows pool frame f % size."""

    def __init__(self, fmt, size: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.views = []
        self.arrays = []
        for _ in range(size):
            planes = []
            for p in range(fmt.num_planes):
                h, w = fmt.plane_shape(p)
                row = w * fmt.dtype.itemsize + 64
                backing = np.zeros((h, row // fmt.dtype.itemsize), fmt.dtype)
                if fmt.bits == 32:
                    backing[:, :w] = rng.random((h, w), dtype=np.float32)
                else:
                    backing[:, :w] = rng.integers(0, int(fmt.peak) + 1, (h, w))
                self.arrays.append(backing)
                planes.append(view(backing))
            self.views.append(tuple(planes))

    def window(self, n: int, radius: int, num_frames: int):
        numbers = tuple(min(max(n + t, 0), num_frames - 1) for t in range(-radius, radius + 1))
        return numbers, tuple(self.views[f % len(self.views)] for f in numbers)


cupy = None  # imported by load_cupy, after the command line is read


def load_cupy():
    """Import CuPy for the GPU scripts' functions and return it (``--help`` runs without it)."""
    global cupy
    import cupy as module

    cupy = module
    return module


def throughput(backend, fmt, passes, frames: int, threads: int, start: int, pool=None) -> float:
    """Frames per second over frames start .. start+frames-1 with `threads` threads.

    `pool` gives the host frames (``window(n, radius, num_frames)``); default: random ones.
    """
    radius = passes[0].window_radius
    planes = sorted({p for o in passes for p in o.planes})
    pool = pool or _FramePool(fmt, 8, seed=1)
    num_frames = start + frames + radius + 1
    inputs = 2 if passes[0].has_ref else 1
    counter = iter(range(start, start + frames))
    lock = threading.Lock()
    errors = []

    def worker():
        _, dst = new_dst(fmt, planes, poison=False)
        process = backend.process
        try:
            while True:
                with lock:
                    n = next(counter, None)
                if n is None:
                    return
                numbers, window = pool.window(n, radius, num_frames)
                process(n, numbers, (window,) * inputs, dst)
        except BaseException as error:
            errors.append(error)

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return frames / elapsed


class _TimedRuntime:
    """Proxy of cupy.cuda.runtime that adds up the time spent in GIL-releasing calls.

    The transfer strategies' NumPy plane copies (``_copy``) release the GIL too and are
    wrapped alike (:func:`_point`).
    """

    NOGIL = ("memcpy2DAsync", "memcpyAsync", "streamSynchronize", "streamWaitEvent", "eventRecord")

    def __init__(self, runtime) -> None:
        self._runtime = runtime
        self.inside = 0.0
        for name in self.NOGIL:
            setattr(self, name, self._wrap(getattr(runtime, name)))

    def _wrap(self, function):
        clock = time.perf_counter

        def timed(*args):
            t0 = clock()
            try:
                return function(*args)
            finally:
                self.inside += clock() - t0

        return timed

    def __getattr__(self, name):
        return getattr(self._runtime, name)


def _point(backend, runtime, copy) -> None:
    """Make the backend and its transfer strategies call `runtime` and `copy`."""
    for owner in (backend, backend.uploader, backend.downloader):
        if hasattr(owner, "_runtime"):
            owner._runtime = runtime
        if hasattr(owner, "_copy"):
            owner._copy = copy


def gil_held_us(backend, fmt, passes, frames: int, start: int) -> tuple[float, float]:
    """(wall us per frame single-threaded, GIL-held us per frame upper bound)."""
    radius = passes[0].window_radius
    planes = sorted({p for o in passes for p in o.planes})
    pool = _FramePool(fmt, 8, seed=2)
    inputs = 2 if passes[0].has_ref else 1
    _, dst = new_dst(fmt, planes, poison=False)
    timed = _TimedRuntime(backend._runtime)
    _point(backend, timed, timed._wrap(np.copyto))
    try:
        t0 = time.perf_counter()
        for n in range(start, start + frames):
            numbers, window = pool.window(n, radius, start + frames + radius + 1)
            backend.process(n, numbers, (window,) * inputs, dst)
        wall = time.perf_counter() - t0
    finally:
        _point(backend, timed._runtime, np.copyto)
    return 1e6 * wall / frames, 1e6 * (wall - timed.inside) / frames


def gpu_ms(backend, repeats: int = 30) -> float:
    """Kernel time per frame (all passes), from CUDA events on the calling thread's stream
    (the records of its last frame, launched as the passes launch them)."""
    state = backend._local.state
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    launch = [
        (p._function_ptr or p._load(), p, args) for p, (args, _) in zip(backend._passes, state.args)
    ]
    calls = backend._calls

    def run_all() -> None:
        for function, p, args in launch:
            calls.launch(function, p.grid, p.block, p.shared_bytes, state.stream_ptr, args)

    run_all()  # one untimed round
    start.record(state.stream)
    for _ in range(repeats):
        run_all()
    stop.record(state.stream)
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) / repeats
