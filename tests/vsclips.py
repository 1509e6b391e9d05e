"""Clips built from NumPy arrays, and the formats the filter tests sweep."""

from __future__ import annotations

import numpy as np
import vapoursynth as vs

#: Formats every filter test sweeps: GRAY, YUV 4:2:0 / 4:2:2 / 4:4:4, RGB; 8-16 bit and float.
FORMATS = {
    "GRAY8": vs.GRAY8,
    "GRAY16": vs.GRAY16,
    "GRAYS": vs.GRAYS,
    "YUV420P8": vs.YUV420P8,
    "YUV420P10": vs.YUV420P10,
    "YUV422P8": vs.YUV422P8,
    "YUV444P8": vs.YUV444P8,
    "YUV444P16": vs.YUV444P16,
    "YUV444PS": vs.YUV444PS,
    "RGB24": vs.RGB24,
    "RGBS": vs.RGBS,
}


def random_planes(fmt, width: int, height: int, seed: int) -> list[np.ndarray]:
    """Random plane contents of a format: smooth structure plus noise, across the full range."""
    rng = np.random.default_rng(seed)
    planes = []
    for plane in range(fmt.num_planes):
        sub_w = fmt.subsampling_w if plane else 0
        sub_h = fmt.subsampling_h if plane else 0
        h, w = height >> sub_h, width >> sub_w
        yy, xx = np.mgrid[0:h, 0:w]
        base = 0.5 + 0.3 * np.sin(xx / 3.0 + seed) * np.cos(yy / 4.0)
        values = np.clip(base + rng.normal(0, 0.08, (h, w)), 0, 1)
        if fmt.sample_type == vs.FLOAT:
            planes.append(values.astype(np.float32))
        else:
            peak = (1 << fmt.bits_per_sample) - 1
            dtype = np.uint8 if fmt.bits_per_sample == 8 else np.uint16
            planes.append(np.rint(values * peak).astype(dtype))
    return planes


def clip_from_planes(core, fmt, frames: list[list[np.ndarray]], **props):
    """A clip whose frame n holds ``frames[n]``'s planes and the given frame properties."""
    height, width = frames[0][0].shape
    blank = core.std.BlankClip(width=width, height=height, format=fmt.id, length=len(frames))

    def fill(n: int, f):
        out = f.copy()
        for plane, data in enumerate(frames[n]):
            np.asarray(out[plane])[...] = data
        for key, value in props.items():
            out.props[key] = value
        return out

    return core.std.ModifyFrame(blank, blank, fill)


def frame_planes(frame) -> list[np.ndarray]:
    """Copies of a frame's planes."""
    return [np.array(frame[p], copy=True) for p in range(frame.format.num_planes)]


def assert_same_frames(got, want) -> None:
    """Every frame of clip `got` equals `want`'s, plane by plane, bit for bit."""
    assert got.num_frames == want.num_frames
    for n in range(want.num_frames):
        pairs = zip(frame_planes(got.get_frame(n)), frame_planes(want.get_frame(n)), strict=True)
        for plane, (g, w) in enumerate(pairs):
            np.testing.assert_array_equal(g, w, err_msg=f"frame {n}, plane {plane}")


def assert_order_independent(make_filter, length: int, seed: int = 5) -> None:
    """Frames requested in a random order, all in flight at once, equal frames requested in order.

    `make_filter` returns a fresh filter node each call, so that the two runs share no cache.
    """
    in_order = make_filter()
    want = [frame_planes(in_order.get_frame(n)) for n in range(length)]
    shuffled = make_filter()
    order = np.random.default_rng(seed).permutation(length)
    futures = {int(n): shuffled.get_frame_async(int(n)) for n in order}
    for n, future in futures.items():
        for got, expected in zip(frame_planes(future.result()), want[n], strict=True):
            np.testing.assert_array_equal(got, expected)
