"""Where a GPU chain's time goes (``gpu_chain_bench.py --profile``).

Two clocks, both from outside the package:

- VapourSynth's node timings (``core.timings.enabled``; ``node.timings`` is the nanoseconds a
  node spent in its filter's getFrame, over every thread): per node of the chain, in
  milliseconds per output frame. Ours on GPU frames includes the host waits for its inputs
  (``waitGPUFrame``) and their exports; through the host, ``GPUDownload`` before it does
  that wait.
- Our GPU-frame path's parts, by wrapping its methods before the chain is built:
  ``GpuFrames.process`` (the whole Python side of a frame), ``Imports.frame`` (the planes'
  addresses, imports included), ``Imports._import`` (the driver's imports, also counted) and
  ``CudaBackend.bridge_process`` (the passes, their copies and the stream's wait).

The wrappers time with ``time.perf_counter_ns`` and add under a lock; each costs about a
microsecond a call, small beside a frame's milliseconds.
"""

from __future__ import annotations

import functools
import threading
import time

#: (label, module, class, method) of the frame path's parts.
PARTS = (
    ("process", "avdenoise_vs._backends.cuda.gpu_frames", "GpuFrames", "process"),
    ("addresses", "avdenoise_vs._cuda.vkimport", "Imports", "frame"),
    ("imports", "avdenoise_vs._cuda.vkimport", "Imports", "_import"),
    ("passes", "avdenoise_vs._backends.cuda.backend", "CudaBackend", "bridge_process"),
)


class PathClock:
    """Total nanoseconds and calls of each of :data:`PARTS`, once :meth:`install` has run."""

    def __init__(self) -> None:
        self.ns = {label: 0 for label, *_ in PARTS}
        self.calls = dict.fromkeys(self.ns, 0)
        self._lock = threading.Lock()

    def install(self) -> None:
        import importlib

        for label, module, cls, method in PARTS:
            owner = getattr(importlib.import_module(module), cls)
            setattr(owner, method, self._timed(label, getattr(owner, method)))

    def _timed(self, label: str, function):
        @functools.wraps(function)
        def timed(*args, **kwargs):
            start = time.perf_counter_ns()
            try:
                return function(*args, **kwargs)
            finally:
                spent = time.perf_counter_ns() - start
                with self._lock:
                    self.ns[label] += spent
                    self.calls[label] += 1

        return timed

    def per_frame(self, frames: int) -> dict:
        """Milliseconds per output frame of each part, and the imports' count."""
        out = {label: round(ns / 1e6 / max(frames, 1), 3) for label, ns in self.ns.items()}
        out["imports_made"] = self.calls["imports"]
        return out


def node_ms(nodes: dict, frames: int) -> dict:
    """Milliseconds per output frame that each named node spent in its getFrame."""
    return {name: round(node.timings / 1e6 / max(frames, 1), 3) for name, node in nodes.items()}


def line(profile: dict) -> str:
    """One row's profile as ``name=ms`` words, nodes first."""
    words = [f"{k}={v}" for k, v in profile.get("nodes", {}).items()]
    words += [f"py.{k}={v}" for k, v in profile.get("path", {}).items()]
    return " ".join(words)
