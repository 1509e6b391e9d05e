"""One NLM pass on the GPU: its kernel, launch geometry and argument record.

Notes
-----
Cost of one pass, per frame, with ``P`` pixels, ``C`` channels and
``K = (2d+1)(2a+1)^2 - 1`` offsets (1080p luma, d=1 a=2 s=4: P = 2.07e6, K = 74):

- Bus: each window frame is uploaded once and then read from the device cache, so a frame
  costs one upload and one download of its planes (8-bit 1080p luma: 2.07 MB each way).
- Device memory: the staging reads of the kernel, ``(2d+1) (1 + (2s+2a)/32)^2`` samples per
  pixel (~5.3 P: 11 MB at 8 bits, 2.5 us at 4.3 TB/s): negligible.
- Arithmetic, per pixel and offset: phase 1 computes ``(1 + 2s/32)(1 + 2s/8)`` = 2.5 pixel
  distances (sub, FMA; the centre samples from registers, the neighbour from shared memory)
  and sliding vertical sums; phase 2 a sliding horizontal sum, one ex2 and C+2 multiply-adds.
  About 25 instructions, 7 of them shared-memory loads. For P*K = 1.53e8 pixel-offsets:
  3.8e9 lane-instructions, 113 us at the H200's 33.8e12 per second (132 SMs x 128 lanes x
  1.98 GHz), and 1.07e9 shared loads, 128 us at one warp-wide load per SM and clock.

Measured on the H200 (CUDA events, scripts/bench/gpu_check.py): 0.253 ms per frame for that case,
about half of either ceiling; 1.18 ms for d=2 a=4 s=4 (K = 404, the same cost per offset);
0.099 ms for d=0; 0.64 ms for 1080p 4:4:4 with the joint YUV distance (C = 3). Keeping the
centre samples in registers (``centre_registers``) took 0.291 ms to 0.253 ms; 16-row tiles
were slower (0.276 ms), as more halo is recomputed per output pixel.

KNLMeansCL's symmetric-offset reuse (the weight of +q at x equals that of -q at x+q) is not
used: it needs the weights of a tile grown by ``a`` on every side (``(1 + 2a/32)^2`` more
weight evaluations) plus a shared-memory weight tile and a second accumulation from it, and
saves only the centre frame's half of the offsets (12 of 74 at d=1, 12 of 24 at d=0); at 16
threads the GPU is not the only limit (see backend.py), so it was left for later.
"""

from __future__ import annotations

import dataclasses
import math
import threading

import numpy as np

from avdenoise_vs._cuda.calls import KernelArgs, cuda_calls
from avdenoise_vs._nlm.cuda.source import (
    BLOCK_WIDTH,
    CENTRE_REGISTER_LIMIT,
    NlmSpec,
    nlm_shared_bytes,
)
from avdenoise_vs._nlm.maths import temporal_radius_at, weight_scale
from avdenoise_vs._params.options import Distance, FrameLayout, SampleType, WeightMode
from avdenoise_vs._params.settings import NlmSettings

__all__ = ["NlmPass", "args_dtype", "choose_tile_height"]

#: Channel weights of the pixel distance that the kernel leaves to `factor` (RGB's redmean
#: weights depend on the samples and stay in the kernel).
_CHANNEL_WEIGHT = {Distance.LUMA: 3.0, Distance.CHROMA: 1.5, Distance.YUV: 1.0, Distance.RGB: 1.0}
_DEFAULT_SHARED_LIMIT = 48 * 1024


def choose_tile_height(spec: NlmSpec, shared_limit: int) -> int | None:
    """The tallest tile (32, 16, 8 rows) whose shared memory fits `shared_limit` bytes."""
    for tile_height in (32, 16, 8):
        if nlm_shared_bytes(dataclasses.replace(spec, tile_height=tile_height)) <= shared_limit:
            return tile_height
    return None


def args_dtype(window: int) -> np.dtype:
    """Host image of ``struct NlmArgs`` in nlm.cuh (8-byte fields only: no padding)."""
    return np.dtype(
        [
            ("guide", np.int64, (window,)),
            ("value", np.int64, (window,)),
            ("out", np.int64),
            ("plane_off", np.int64, (3,)),
            ("out_off", np.int64, (3,)),
            ("width", np.int64),
            ("height", np.int64),
            ("pitch", np.int64),
            ("out_pitch", np.int64),
            ("first", np.int64),
            ("factor", np.float64),
            ("wref", np.float64),
            ("peak", np.float64),
            ("red_scale", np.float64),
        ]
    )


class NlmPass:
    """Everything needed to launch one :class:`NlmSettings` pass, built once per backend.

    Parameters
    ----------
    options : NlmSettings
    layout : FrameLayout
    slot_offsets, out_offsets : dict of int to int
        Byte offset of each plane inside a frame slot and inside an output buffer.
    pitch : dict of int to int
        Row pitch in bytes of each plane (the same in slots and output buffers).
    tile_height : int
        From :func:`choose_tile_height`.
    centre_registers : bool, optional
        See :class:`NlmSpec`; by default on when a phase-1 thread's centre samples number at
        most ``CENTRE_REGISTER_LIMIT``.
    """

    def __init__(
        self,
        options: NlmSettings,
        layout: FrameLayout,
        slot_offsets: dict[int, int],
        out_offsets: dict[int, int],
        pitch: dict[int, int],
        tile_height: int,
        centre_registers: bool | None = None,
    ) -> None:
        self.options = options
        if centre_registers is None:
            channels = 1 if options.distance is Distance.LUMA else len(options.planes)
            centre_registers = channels * (8 + 2 * options.patch_radius) <= CENTRE_REGISTER_LIMIT
        self.spec = NlmSpec(
            search_radius=options.search_radius,
            patch_radius=options.patch_radius,
            radius=options.radius,
            distance=options.distance,
            wmode=WeightMode(options.wmode),
            dtype=layout.dtype.name,
            has_ref=options.has_ref,
            tile_height=tile_height,
            centre_registers=centre_registers,
        )
        self.window = self.spec.window
        self.shared_bytes = nlm_shared_bytes(self.spec)
        height, width = layout.plane_shape(options.planes[0])
        self.grid = (-(-width // BLOCK_WIDTH), -(-height // tile_height), 1)
        self.block = (self.spec.threads, 1, 1)
        self._function = None
        self._function_ptr = 0  # its CUfunction handle, for the driver call
        self._calls = None
        self._lock = threading.Lock()

        itemsize = layout.dtype.itemsize
        template = np.zeros(1, dtype=args_dtype(self.window))
        for index, plane in enumerate(options.planes):
            template["plane_off"][0, index] = slot_offsets[plane] // itemsize
            template["out_off"][0, index] = out_offsets[plane] // itemsize
        template["width"] = width
        template["height"] = height
        template["pitch"] = pitch[options.planes[0]] // itemsize
        template["out_pitch"] = pitch[options.planes[0]] // itemsize
        peak = layout.peak
        factor = (
            weight_scale(options.strength, options.patch_radius)
            * _CHANNEL_WEIGHT[options.distance]
            / (peak * peak)
        )
        if options.wmode == WeightMode.WELSCH:
            factor *= math.log2(math.e)  # the kernel takes exp2
        template["factor"] = factor
        template["wref"] = options.wref
        template["peak"] = peak
        template["red_scale"] = 1.0 / (6.0 * peak)
        self._template = template
        self._first_index = template.dtype.fields["first"][1] // 8  # in the int64 view
        self.integer = layout.sample_type is SampleType.INTEGER

    def new_args(self, out_ptr: int) -> tuple[KernelArgs, np.ndarray]:
        """A per-thread argument record writing to `out_ptr`, and its int64 view.

        The first ``2 * window`` int64 of the view are the guide and value slot addresses,
        rewritten for every frame.
        """
        record = self._template.copy()
        record["out"] = out_ptr
        return KernelArgs(record), record.view(np.int64)

    def launch(self, args, numbers: tuple, values: list, guides: list, state) -> None:
        """Queue this pass's kernel for one frame on the thread's stream (window slots).

        `numbers` is the bridge's window, the frame being denoised in its middle; near the
        clip's start only its middle frames take part (KNLMeansCL's window).
        """
        kernel_args, view = args
        window = self.window
        radius = self.spec.radius
        view[:window] = guides if self.options.has_ref else values
        view[window : 2 * window] = values
        view[self._first_index] = radius - temporal_radius_at(numbers[radius], radius)
        function = self._function_ptr or self._load()
        self._calls.launch(
            function, self.grid, self.block, self.shared_bytes, state.stream_ptr, kernel_args
        )

    def release(self, lease) -> None:
        """Nothing to give back: an NLM pass holds no per-frame resources."""

    def memory_bytes(self) -> int:
        """Device memory of its own: none (the backend owns slots and output buffers)."""
        return 0

    def forget(self, numbers) -> None:
        """Nothing cached per frame number."""

    def prepare(self) -> None:
        """Compile (or load from CuPy's cache) the kernel now, on the current device."""
        self._load()

    def _load(self) -> int:
        """Compile (or load) the kernel on first use; returns its ``CUfunction`` handle."""
        self._calls = cuda_calls()
        self._function_ptr = self.function().ptr
        return self._function_ptr

    def function(self):
        """The compiled kernel on the current device (compiles on first use)."""
        function = self._function
        if function is None:
            from avdenoise_vs._cuda.kernels import get_nlm_main_kernel  # imports CuPy

            with self._lock:
                if self._function is None:
                    kernel = get_nlm_main_kernel(self.spec)
                    if self.shared_bytes > _DEFAULT_SHARED_LIMIT:
                        kernel.max_dynamic_shared_size_bytes = self.shared_bytes
                    self._function = kernel.kernel
                function = self._function
        return function
