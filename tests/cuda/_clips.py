"""Synthetic clips as the bridge hands them over: host planes with padded strides.

Shared by the CUDA tests and ``scripts/bench/gpu_check.py``; needs NumPy only.
"""

from __future__ import annotations

import numpy as np

from avdenoise_vs._params.options import ColorFamily, Distance, FrameLayout, SampleType, WeightMode
from avdenoise_vs._params.settings import NlmSettings

__all__ = [
    "SyntheticClip",
    "layout",
    "lumachroma",
    "new_dst",
    "options",
    "plane_values",
    "run",
    "view",
]

_PAD = 64  # extra bytes per row, so that strides differ from the row size as in VapourSynth


def layout(family="gray", sub_w=0, sub_h=0, bits=8, width=37, height=29) -> FrameLayout:
    """A FrameLayout from short names: family 'gray', 'yuv' or 'rgb'; bits 32 means float."""
    return FrameLayout(
        width=width,
        height=height,
        color_family=ColorFamily(family),
        subsampling_w=sub_w,
        subsampling_h=sub_h,
        bits=bits,
        sample_type=SampleType.FLOAT if bits == 32 else SampleType.INTEGER,
    )


def options(planes, distance, *, h=4.0, r=1, a=2, s=2, wmode=0, wref=1.0, ref=False):
    """An NLM pass with short keyword names (KNLMeansCL's h, d, a, s)."""
    return NlmSettings(
        planes=tuple(planes),
        distance=distance,
        strength=float(h),
        radius=r,
        search_radius=a,
        patch_radius=s,
        wmode=WeightMode(wmode),
        wref=float(wref),
        has_ref=ref,
    )


def lumachroma(**kwargs) -> tuple[NlmSettings, ...]:
    """The default two passes of a YUV clip: luma, then chroma jointly."""
    return (options((0,), Distance.LUMA, **kwargs), options((1, 2), Distance.CHROMA, **kwargs))


def view(backing: np.ndarray) -> tuple[int, int, memoryview]:
    """``(address, stride, memoryview)`` of a padded plane, as the bridge passes it."""
    return backing.ctypes.data, backing.strides[0], memoryview(backing).cast("B")


def _padded(shape, dtype) -> np.ndarray:
    height, width = shape
    dtype = np.dtype(dtype)
    row = width * dtype.itemsize + _PAD
    return np.zeros((height, row // dtype.itemsize), dtype=dtype)


def plane_values(backing: np.ndarray, shape) -> np.ndarray:
    """The (height, width) samples of a padded plane."""
    return backing[: shape[0], : shape[1]]


def new_dst(fmt: FrameLayout, planes, poison=True):
    """Output planes for `planes` (others None): ``(backings, dst tuple)``."""
    backings = {}
    for p in planes:
        backing = _padded(fmt.plane_shape(p), fmt.dtype)
        if poison:
            backing.view(np.uint8)[...] = 0xA5
        backings[p] = backing
    dst = tuple(view(backings[p]) if p in backings else None for p in range(fmt.num_planes))
    return backings, dst


class SyntheticClip:
    """A smooth moving pattern plus Gaussian noise; the same seed gives the same frames."""

    def __init__(self, fmt: FrameLayout, num_frames: int, seed: int = 0, noise: float = 0.02):
        rng = np.random.default_rng(seed)
        self.layout = fmt
        self.num_frames = num_frames
        self.frames = []
        for n in range(num_frames):
            planes = []
            for p in range(fmt.num_planes):
                shape = fmt.plane_shape(p)
                yy, xx = np.mgrid[0 : shape[0], 0 : shape[1]].astype(np.float64)
                base = 0.5 + 0.3 * np.sin(0.31 * xx + 0.2 * n + p) * np.cos(0.23 * yy - 0.1 * n)
                base += 0.1 * xx / shape[1] + rng.normal(0.0, noise, shape)
                base = np.clip(base, 0.0, 1.0)
                backing = _padded(shape, fmt.dtype)
                target = plane_values(backing, shape)
                if fmt.sample_type is SampleType.FLOAT:
                    chroma = fmt.color_family is ColorFamily.YUV and p > 0
                    target[...] = base - 0.5 if chroma else base
                else:
                    target[...] = np.rint(base * fmt.peak)
                planes.append(backing)
            self.frames.append(planes)

    def window(self, n: int, radius: int):
        """``(frame_numbers, window)`` of frame n, clamped at the clip ends as the bridge does."""
        numbers = tuple(min(max(n + t, 0), self.num_frames - 1) for t in range(-radius, radius + 1))
        window = tuple(tuple(view(b) for b in self.frames[f]) for f in numbers)
        return numbers, window


def run(backend, clips, n: int, radius: int, planes, poison=True):
    """Run ``backend.process`` for frame n; returns {plane: (height, width) output array}."""
    numbers, window = clips[0].window(n, radius)
    windows = (window,) + tuple(c.window(n, radius)[1] for c in clips[1:])
    fmt = clips[0].layout
    backings, dst = new_dst(fmt, planes, poison)
    backend.process(n, numbers, windows, dst)
    return {p: plane_values(b, fmt.plane_shape(p)).copy() for p, b in backings.items()}
