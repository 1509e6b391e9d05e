"""One BM3D pass on the GPU: its kernels, work buffers and launch sequence.

A frame of a pass is three to five launches on the calling thread's stream (bm3d.cuh):
load the window into float planes, hard thresholding, finish into basic estimates, Wiener
filtering, finish into the output buffer. The work buffers (float planes, int64
accumulators) are large, so they live in a small pool of *workspaces* shared by the
VapourSynth threads rather than one per thread: a frame holds one workspace from its first
launch until its stream has synchronized, and threads beyond the pool wait without the GIL.

Notes
-----
Cost per reference block (warp): ``N = (2 bm_range + 1)^2 + 2r ps_num (2 ps_range + 1)^2``
block distances of 64 multiply-adds each, ``K`` rounds of a warp-wide minimum over the ``N``
candidates to form the group, then per channel two 2-D transforms of ``K`` blocks (16 multiply-
adds per sample), the Haar transform along the group and ``2 * 64 K`` int64 atomic adds.
There are ``ceil(H / step) ceil(W / step)`` reference blocks in every window frame: V-BM3D
takes reference blocks in all ``2r + 1`` frames, as the reference does, so a radius-1 frame
matches three frames' worth of blocks.
"""

from __future__ import annotations

import queue
import threading

import numpy as np

from .._options import Distance, FrameLayout, PlaneOptions
from .._reference._bm3d_stages import TAU_WIENER, ht_match_threshold
from ._bm3d_source import BM3D_WARPS, Bm3dSpec

__all__ = ["Bm3dPass", "bm3d_args_dtype"]

_ALIGN = 128  # work-plane pitch, elements
_PIXEL_BLOCK = (32, 8, 1)  # threads of the per-pixel kernels
_DEFAULT_SHARED_LIMIT = 48 * 1024
#: Workspaces per pass: frames of one pass on the GPU at once.
DEFAULT_WORKSPACES = 4
#: Largest plane side: block keys pack positions into 13 bits (bm3d.cuh, ``bm_key``).
MAX_PLANE_SIDE = (1 << 13) + 7


def bm3d_args_dtype(window: int) -> np.dtype:
    """Host image of ``struct Bm3dArgs`` in bm3d.cuh (8-byte fields only: no padding)."""
    i8, f8 = np.int64, np.float64
    return np.dtype(
        [("src", i8, (2, window))]
        + [(name, i8) for name in ("noisy", "pilot", "num", "den", "out")]
        + [("plane_off", i8, (3,))]
        + [(name, i8) for name in ("width", "height", "src_pitch", "pitch")]
        + [(name, i8) for name in ("refs_x", "refs_y", "step", "center")]
        + [(name, i8) for name in ("acc_all", "to_pilot", "inputs")]
        + [("sigma", f8, (3,))]
        + [(name, f8) for name in ("lambda_ht", "threshold", "scale", "peak")]
    )


def _reference_count(length: int, step: int) -> int:
    """Reference positions along an axis of `length` pixels (the reference's grid)."""
    last = length - 8
    return -(-last // step) + 1


class _Workspace:
    """One frame's worth of work buffers and the argument record of each launch."""

    __slots__ = ("memory", "records")


class Bm3dPass:
    """Everything needed to run one BM3D :class:`PlaneOptions` pass, built once per backend.

    Parameters
    ----------
    options : PlaneOptions
    layout : FrameLayout
    offsets : dict of int to int
        Byte offset of each plane inside a frame slot and inside an output buffer.
    pitch : dict of int to int
        Row pitch in bytes of each plane (the same in slots and output buffers).
    workspaces : int
        Most frames of this pass on the GPU at once.
    """

    def __init__(
        self,
        options: PlaneOptions,
        layout: FrameLayout,
        offsets: dict[int, int],
        pitch: dict[int, int],
        workspaces: int = DEFAULT_WORKSPACES,
    ) -> None:
        self.options = options
        planes = options.planes
        height, width = layout.plane_shape(planes[0])
        self.spec = Bm3dSpec(
            window=2 * options.radius + 1,
            channels=len(planes),
            joint=options.distance in (Distance.YUV, Distance.RGB),
            rgb=options.distance is Distance.RGB,
            dtype=layout.dtype.name,
            bm_range=options.bm_range,
            ps_num=options.ps_num,
            ps_range=options.ps_range,
        )
        self.window = self.spec.window
        self.run_hard = not options.has_ref
        self.run_wiener = options.stages == 2 or options.has_ref
        work_pitch = -(-width // _ALIGN) * _ALIGN
        plane = height * work_pitch
        channels = self.spec.channels
        self._acc_frames = self.window if (self.run_hard and self.run_wiener) else 1
        self._float_bytes = 4 * self.window * channels * plane
        self._acc_bytes = 8 * self._acc_frames * channels * plane
        self.workspace_bytes = (1 + self.run_wiener) * self._float_bytes + 2 * self._acc_bytes
        self._limit = workspaces
        self._pool: queue.SimpleQueue[_Workspace] = queue.SimpleQueue()
        self._created = 0
        self._lock = threading.Lock()
        self._kernels = None

        itemsize = layout.dtype.itemsize
        refs = (_reference_count(width, options.block_step),
                _reference_count(height, options.block_step))  # fmt: skip
        template = np.zeros(1, dtype=bm3d_args_dtype(self.window))
        template["plane_off"][0, : len(planes)] = [offsets[p] // itemsize for p in planes]
        template["width"], template["height"] = width, height
        template["src_pitch"] = pitch[planes[0]] // itemsize
        template["pitch"] = work_pitch
        template["refs_x"], template["refs_y"] = refs
        template["step"] = options.block_step
        template["center"] = options.radius
        template["sigma"][0, :channels] = options.plane_strengths or options.strength
        template["lambda_ht"] = options.lambda_ht
        template["scale"] = 255.0 / layout.peak
        template["peak"] = layout.peak
        template["inputs"] = 2 if options.has_ref else 1
        self._template = template
        pixels = (-(-width // _PIXEL_BLOCK[0]), -(-height // _PIXEL_BLOCK[1]))
        self._launches = self._plan(pixels, refs[0] * refs[1])

    def _plan(self, pixels: tuple[int, int], refs: int) -> list[tuple]:
        """(kernel name, grid, shared bytes, record overrides) of each launch, in order."""
        spec, options = self.spec, self.options
        separate = 1 if spec.joint else spec.channels
        stage_grid = (-(-refs // BM3D_WARPS), self.window, separate)
        inputs = 2 if options.has_ref else 1
        launches = [("bm3d_load", (*pixels, self.window * inputs), 0, {})]
        if self.run_hard:
            threshold = ht_match_threshold(options.strength) * options.mismatch_scale
            launches.append(
                ("bm3d_hard", stage_grid, spec.shared_bytes(False),
                 {"threshold": threshold, "acc_all": int(self._acc_frames > 1)})
            )  # fmt: skip
            if self.run_wiener:
                launches.append(("bm3d_finish", (*pixels, self._acc_frames), 0, {"to_pilot": 1}))
        if self.run_wiener:
            threshold = TAU_WIENER * options.mismatch_scale
            launches.append(("bm3d_wiener", stage_grid, spec.shared_bytes(True),
                             {"threshold": threshold, "acc_all": 0}))  # fmt: skip
        launches.append(("bm3d_finish", (*pixels, 1), 0, {"to_pilot": 0}))
        return launches

    # -- per frame --------------------------------------------------------------------------

    def new_args(self, out_ptr: int) -> int:
        """Per-thread launch state: the thread's output buffer."""
        return out_ptr

    def launch(self, out_ptr: int, values: list, guides: list, stream) -> _Workspace:
        """Queue one frame's launches on `stream`; returns the workspace to :meth:`release`
        once the stream has synchronized."""
        kernels = self._kernels or self._load_kernels()
        workspace = self._acquire()
        try:
            records = workspace.records
            load = records[0]
            load["src"][0, 0] = values
            load["src"][0, 1] = guides
            records[-1]["out"] = out_ptr
            for (name, grid, shared, _), record in zip(self._launches, records, strict=True):
                block = (32 * BM3D_WARPS,) if shared else _PIXEL_BLOCK
                kernels[name](grid, block, (record,), shared, stream)
        except BaseException:
            self.release(workspace)
            raise
        return workspace

    def release(self, workspace: _Workspace) -> None:
        """Return a workspace to the pool."""
        self._pool.put(workspace)

    def memory_bytes(self) -> int:
        """Device memory of the workspaces created so far."""
        return self._created * self.workspace_bytes

    # -- internals ----------------------------------------------------------------------------

    def _acquire(self) -> _Workspace:
        try:
            return self._pool.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            create = self._created < self._limit
            if create:
                self._created += 1
        if create:
            try:
                return self._new_workspace()
            except BaseException:
                with self._lock:
                    self._created -= 1
                raise
        return self._pool.get()  # blocks without the GIL until a frame finishes

    def _new_workspace(self) -> _Workspace:
        """Allocate work buffers (accumulators zeroed: each finish leaves them zero)."""
        import cupy

        workspace = _Workspace()
        memory = cupy.cuda.alloc(self.workspace_bytes)
        cupy.cuda.runtime.memset(memory.ptr, 0, self.workspace_bytes)
        workspace.memory = memory
        base = memory.ptr
        addresses = {"num": base, "den": base + self._acc_bytes}
        addresses["noisy"] = base + 2 * self._acc_bytes
        addresses["pilot"] = addresses["noisy"] + self._float_bytes if self.run_wiener else 0
        records = []
        for _, _, _, overrides in self._launches:
            record = self._template.copy()
            for name, value in (addresses | overrides).items():
                record[name] = value
            records.append(record)
        workspace.records = records
        return workspace

    def _load_kernels(self) -> dict:
        from ._kernels import get_bm3d_kernels  # imports CuPy

        with self._lock:
            if self._kernels is None:
                kernels = get_bm3d_kernels(self.spec)
                functions = {}
                for name, _, shared, _ in self._launches:
                    kernel = kernels[name]
                    if shared > _DEFAULT_SHARED_LIMIT:
                        kernel.max_dynamic_shared_size_bytes = shared
                    functions[name] = kernel.kernel
                self._kernels = functions
        return self._kernels
