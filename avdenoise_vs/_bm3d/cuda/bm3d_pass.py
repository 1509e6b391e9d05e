"""One BM3D pass on the GPU: its kernels, its workspaces and the schedule of its launches.

:class:`Bm3dPass` is what the backend holds per BM3D pass. At creation it sizes the work buffers
(``_bm3d/cuda/workspace.py``), builds the argument template (``_bm3d/cuda/args.py``) and picks the
schedule that turns frames into launches: :class:`SpatialSchedule` for ``radius = 0``
(``_bm3d/cuda/schedule.py``), :class:`VBm3dSchedule` otherwise (``_bm3d/cuda/vbm3d_schedule.py``).
It then only leases a workspace to each frame, hands the frame to the schedule and launches the
kernels (bm3d_common.cuh and the parts after it) the schedule asks for.

Notes
-----
Cost per reference block (warp): ``N = (2 bm_range + 1)^2 + 2r ps_num (2 ps_range + 1)^2`` block
distances of 64 multiply-adds each, a warp-wide selection of the ``K`` nearest, then per channel two
2-D transforms of ``K`` blocks (16 multiply-adds per sample), the Haar transform along the group and
``2 * 64 K`` int64 atomic adds (into the thread block's shared sums where they pay:
``_bm3d/cuda/launch.py``). There are ``ceil(H / step) ceil(W / step)`` reference blocks per frame
and stage.
"""

from __future__ import annotations

import threading

from avdenoise_vs._bm3d.cuda.args import Bm3dRecords, bm3d_args_dtype, reference_grid
from avdenoise_vs._bm3d.cuda.launch import fit_occupancy, fit_tiles, stage_launches
from avdenoise_vs._bm3d.cuda.schedule import SpatialSchedule, TemporalSchedule
from avdenoise_vs._bm3d.cuda.source import Bm3dSpec
from avdenoise_vs._bm3d.cuda.vbm3d_schedule import VBm3dSchedule
from avdenoise_vs._bm3d.cuda.workspace import (
    DEFAULT_WORKSPACES,
    SPATIAL_FRAMES_IN_FLIGHT,
    Lease,
    WorkSizes,
    WorkspacePool,
)  # fmt: skip
from avdenoise_vs._bm3d.maths import bm3d_sigmas, group_sizes
from avdenoise_vs._cuda.calls import KernelArgs, cuda_calls
from avdenoise_vs._params.options import Distance, FrameLayout, SampleType
from avdenoise_vs._params.settings import Bm3dSettings, Stages

__all__ = ["DEFAULT_WORKSPACES", "MAX_PLANE_SIDE", "Bm3dPass", "bm3d_args_dtype"]

_PIXEL_BLOCK = (32, 8, 1)  # threads of the per-pixel kernels
_DEFAULT_SHARED_LIMIT = 48 * 1024
#: Shared memory a thread block may opt in to on Hopper, bytes (tests make passes with it).
HOPPER_SHARED_LIMIT = 227 * 1024
#: Largest plane side: block keys pack positions into 13 bits (bm3d_match.cuh, ``bm_key``).
MAX_PLANE_SIDE = (1 << 13) + 7


def _pass_spec(options: Bm3dSettings, layout: FrameLayout, shared_limit: int) -> Bm3dSpec:
    """The compile-time values of a pass's kernels, and which kernels it launches, with tiles
    whose thread blocks fit `shared_limit` bytes of shared memory where they can."""
    stages = ("bm3d_hard",) * (not options.has_ref) + ("bm3d_wiener",) * (
        Stages.WIENER in options.stages
    )
    spec = Bm3dSpec(
        window=2 * options.radius + 1,
        channels=len(options.planes),
        joint=options.distance in (Distance.YUV, Distance.RGB),
        rgb=options.distance is Distance.RGB,
        dtype=layout.dtype.name,
        bm_range=options.bm_range,
        ps_num=options.ps_num,
        ps_range=options.ps_range,
        kernels=("bm3d_load", *stages, "bm3d_finish"),
        groups=group_sizes(2 * options.radius + 1, bm3d_sigmas(options)[0], options.block_step),
    )
    return fit_occupancy(fit_tiles(spec, shared_limit), options.block_step, shared_limit)


class Bm3dPass:
    """Everything needed to run one :class:`Bm3dSettings` pass, built once per backend.

    Parameters
    ----------
    options : Bm3dSettings
    layout : FrameLayout
    offsets : dict of int to int
        Byte offset of each plane inside a frame slot and inside an output buffer.
    pitch : dict of int to int
        Row pitch in bytes of each plane (the same in slots and output buffers).
    workspaces : int, optional
        Work buffers of this pass, default ``DEFAULT_WORKSPACES``: V-BM3D's frames on the GPU
        at once; a spatial pass runs ``SPATIAL_FRAMES_IN_FLIGHT`` or this many, if more.
    accumulators : int, optional
        V-BM3D: accumulators kept on the GPU (``vbm3d_schedule.VBm3dSchedule``).
    shared_limit : int, optional
        Shared memory a thread block may take on the device, bytes; default
        ``HOPPER_SHARED_LIMIT``.
    """

    def __init__(
        self,
        options: Bm3dSettings,
        layout: FrameLayout,
        offsets: dict[int, int],
        pitch: dict[int, int],
        workspaces: int | None = None,
        shared_limit: int = HOPPER_SHARED_LIMIT,
        accumulators: int | None = None,
    ) -> None:
        self.options = options
        self.spec = _pass_spec(options, layout, shared_limit)
        self.window = self.spec.window
        self.finish_reads_source = layout.sample_type is SampleType.FLOAT
        self.run_hard = not options.has_ref
        self.run_wiener = Stages.WIENER in options.stages
        height, width = layout.plane_shape(options.planes[0])
        sizes = WorkSizes.of(self.spec.channels, height, width)
        refs = reference_grid(options, layout)
        self._stages = stage_launches(self.spec, refs, options.block_step, shared_limit)
        sums = {name: launch.sums for name, launch in self._stages.items()}
        self.records = Bm3dRecords(options, layout, offsets, pitch, sizes.pitch, sums)
        spatial = self.spatial = self.window == 1
        count = workspaces or DEFAULT_WORKSPACES[not spatial]
        self.frames_in_flight = max(count, SPATIAL_FRAMES_IN_FLIGHT) if spatial else count
        self._schedule: TemporalSchedule = (
            SpatialSchedule(self) if spatial
            else VBm3dSchedule(self, options.radius, sizes, self.frames_in_flight, accumulators)
        )  # fmt: skip
        # Pilot planes: the ref clip's, or a spatial pass's basic estimate for its Wiener stage.
        pilots = self.window if options.has_ref or (spatial and self.run_wiener) else 0
        self._pool = WorkspacePool(sizes, (self.window, pilots), spatial, count,
                                   self._schedule.equip)  # fmt: skip
        self.workspace_bytes = self._pool.workspace_bytes
        self._pixel_grid = (-(-width // _PIXEL_BLOCK[0]), -(-height // _PIXEL_BLOCK[1]))
        self._load_grid = (*self._pixel_grid, self.window * (1 + options.has_ref))
        self._lock = threading.Lock()  # the kernels
        self._kernels = None
        self.calls = None  # cuda_calls(), with the kernels

    @property
    def shared_needed(self) -> int:
        """Shared memory per thread block of the pass's largest stage kernel launch, bytes."""
        run = (("bm3d_hard",) * self.run_hard) + (("bm3d_wiener",) * self.run_wiener)
        return max(self._stages[name].shared for name in run)

    # -- per frame --------------------------------------------------------------------------

    def new_args(self, out_ptr: int) -> int:
        """Launch state: the output buffer (a thread's, or the one the gate lent a frame)."""
        return out_ptr

    def launch(self, out_ptr: int, numbers: tuple, values: list, guides: list, state) -> Lease:
        """Queue one frame's work on the thread's stream; returns what to :meth:`release`
        once the stream has synchronized."""
        self._kernels or self._load_kernels()
        lease = Lease(self._pool.acquire())
        stream = state.stream_ptr
        try:
            if self.spatial and lease.workspace.free_event:  # the last frame's kernels first
                self.calls.streamWaitEvent(stream, lease.workspace.free_event)
            self._schedule.frame(lease, numbers, values, guides, out_ptr, stream)
        except BaseException:
            self._schedule.abandon(lease)
            self.release(lease)
            raise
        if self.spatial:
            self._hand_on(lease, stream)
        return lease

    def release(self, lease: Lease) -> None:
        """Give back what a frame held (its stream has synchronized)."""
        lease.settle()
        if lease.workspace is not None:
            self._pool.put(lease.workspace)

    def _hand_on(self, lease: Lease, stream: int) -> None:
        """Give a spatial frame's workspace back now, its kernels queued: the event recorded
        after them makes the next frame that takes it wait on the GPU, not on the host."""
        workspace = lease.workspace
        if not workspace.free_event:
            workspace.free_event = self.calls.event()
        self.calls.eventRecord(workspace.free_event, stream)
        lease.workspace = None
        self._pool.put(workspace)

    def forget(self, numbers) -> None:
        """Drop the accumulators and basic estimates of frames `numbers` (warm-up frames)."""
        self._schedule.forget(numbers)

    def produced(self) -> dict[str, int]:
        """V-BM3D work made so far by kind: "hard" and "wiener" jobs, "basic" estimates.

        Once per frame and kind when no accumulator is dropped before it is finished; more
        means the caches are too small for the order the frames come in (benchmarks report it).
        """
        return self._schedule.produced()

    def memory_bytes(self) -> int:
        """Device memory of the workspaces and cached entries created so far."""
        return self._pool.memory_bytes() + self._schedule.memory_bytes()

    # -- kernels ----------------------------------------------------------------------------

    def run(self, name: str, args: KernelArgs, stream: int) -> None:
        """Launch kernel `name` (one of ``BM3D_KERNELS``) on `stream`."""
        stage = self._stages.get(name)
        if stage is not None:
            self.calls.launch(
                self._kernels[name], stage.grid, stage.block, stage.shared, stream, args
            )
            return
        grid = self._load_grid if name == "bm3d_load" else (*self._pixel_grid, 1)
        self.calls.launch(self._kernels[name], grid, _PIXEL_BLOCK, 0, stream, args)

    def prepare(self) -> None:
        """Compile (or load from CuPy's cache) the kernels now, on the current device."""
        self._load_kernels()

    def _load_kernels(self) -> dict[str, int]:
        """Compile (or load) the kernels; returns their ``CUfunction`` handles by role."""
        from avdenoise_vs._cuda.kernels import get_bm3d_kernels

        with self._lock:
            if self._kernels is None:
                self.calls = cuda_calls()
                kernels = get_bm3d_kernels(self.spec)  # memoized: the modules stay loaded
                for name, stage in self._stages.items():
                    if name in kernels and stage.shared > _DEFAULT_SHARED_LIMIT:
                        kernels[name].max_dynamic_shared_size_bytes = stage.shared
                self._schedule.start()
                self._kernels = {name: kernel.kernel.ptr for name, kernel in kernels.items()}
        return self._kernels
