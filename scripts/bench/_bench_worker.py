"""What a benchmark's worker process does (``SCRIPT --worker PLUGIN CASE``, see ``_bench.py``).

It builds the source and the filter of one (plugin, case), times the first frame, measures
the luma PSNR against the clean clip and the GPU memory taken, and has vspipe render a
stretch of frames through ``SCRIPT.vpy`` (which calls :func:`render`) for the fps.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _bench_types import Bench, Noise

__all__ = ["gpu_memory_used", "make_source", "render", "run_worker", "vspipe_fps"]

ROOT = Path(__file__).resolve().parents[2]


def make_source(core, fmt_name: str, width: int, height: int, noise: Noise):
    """(noisy, clean) clips: 24 crops of an upscaled real picture panning, looped.

    Integer formats get the noise rounded around mid-grey; float formats (luma in [0, 1],
    chroma centred on 0) get it as drawn.
    """
    import numpy as np
    import vapoursynth as vs

    sys.path.insert(0, str(ROOT))
    from avdenoise_vs.sample import _picture

    picture = _picture()
    blank = core.std.BlankClip(
        width=picture.shape[1], height=picture.shape[0], format=vs.RGB24, length=1
    )

    def fill(n, f):
        out = f.copy()
        for p in range(3):
            np.asarray(out[p])[...] = picture[..., p]
        return out

    rgb = core.std.ModifyFrame(blank, blank, fill)
    big = core.resize.Bicubic(
        rgb, width + 96, height + 48, format=getattr(vs, fmt_name), matrix_s="709"
    )
    crops = [core.std.CropAbs(big, width, height, left=4 * n, top=2 * n) for n in range(24)]
    clean = core.std.Splice(crops)
    fmt = clean.format
    if fmt.sample_type == vs.FLOAT:
        peak, mid = 1.0, 0
    else:
        peak = (1 << fmt.bits_per_sample) - 1
        mid = (peak + 1) // 2
    rng = np.random.default_rng(0)

    def fill_noise(n, f):
        out = f.copy()
        for p in range(fmt.num_planes):
            plane = np.asarray(out[p])
            drawn = noise.draw(rng, plane.shape, peak)
            plane[...] = drawn if fmt.sample_type == vs.FLOAT else np.rint(mid + drawn)
        return out

    # One noise frame, rendered once and cached, cropped at a different offset per frame:
    # the looped source then costs no Python time per frame.
    blank_noise = core.std.BlankClip(big, length=1)
    noise_clip = core.std.ModifyFrame(blank_noise, blank_noise, fill_noise)
    offsets = [((36 * n) % 96, (18 * n) % 48) for n in range(24)]
    noise_clip = core.std.Splice(
        [core.std.CropAbs(noise_clip, width, height, left=x, top=y) for x, y in offsets]
    )
    noisy = core.std.Expr([clean, noise_clip], [f"x y + {mid} -"] * fmt.num_planes)
    return core.std.Loop(noisy, times=400), core.std.Loop(clean, times=400)


def _core(bench: Bench, plugin: str, case: str):
    """VapourSynth's core with the benchmark's thread count and `bench.setup` applied."""
    import vapoursynth as vs

    core = vs.core
    core.num_threads = int(os.environ.get("BENCH_THREADS", "16"))
    if bench.setup is not None:
        bench.setup(core, plugin, case)
    return core


def render(bench: Bench, plugin: str, case: str):
    """The filtered clip of one case: what the benchmark's ``.vpy`` outputs for vspipe."""
    core = _core(bench, plugin, case)
    noisy, _ = bench.source(core, case)
    return bench.build(core, plugin, case, noisy)[0]


def gpu_memory_used() -> int | None:
    """Bytes in use on GPU 0 (all processes), or None without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
    except Exception:
        return None


def _luma_psnr(out, clean) -> float | None:
    """Mean luma PSNR of frames 3, 9 and 15 against the clean clip; None if not comparable."""
    import numpy as np
    import vapoursynth as vs

    from avdenoise_vs.sample import psnr

    if (out.width, out.height) != (clean.width, clean.height):
        return None  # a stacked intermediate (V-BM3D before aggregation)
    fmt = clean.format
    peak = 1.0 if fmt.sample_type == vs.FLOAT else (1 << fmt.bits_per_sample) - 1
    scores = [
        psnr(np.asarray(out.get_frame(n)[0]), np.asarray(clean.get_frame(n)[0]), peak)
        for n in (3, 9, 15)
    ]
    return float(np.mean(scores))


def run_worker(bench: Bench, plugin: str, case: str, seconds: float, repeat: int = 1) -> dict:
    """Time one filter in this process; return its row.

    The rate is the median of `repeat` vspipe measurements (all of them in ``fps_runs``):
    1-second windows of the same build varied by up to a quarter from run to run on the H200.
    """
    sys.path.insert(0, str(ROOT))
    memory_before = gpu_memory_used()
    core = _core(bench, plugin, case)
    noisy, clean = bench.source(core, case)
    start = time.perf_counter()
    out, note = bench.build(core, plugin, case, noisy)
    out.get_frame(0)
    first_frame = time.perf_counter() - start
    quality = _luma_psnr(out, clean)
    probe = min(96, out.num_frames)
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        out[:probe].output(sink)
    estimate = probe / (time.perf_counter() - t0)
    frames = int(min(out.num_frames - probe, max(200, 2 * estimate * seconds)))
    runs = [vspipe_fps(bench, plugin, case, probe, probe + frames - 1) for _ in range(repeat)]
    memory_after = gpu_memory_used()
    memory = None if memory_before is None else (memory_after - memory_before) / 2**20
    fps = statistics.median(runs)
    row = dict(plugin=plugin, case=case, fps=fps, frames=frames, first_frame_s=first_frame)
    row["fps_runs"] = runs
    row.update(psnr=quality, gpu_mib=memory)
    if note:
        row["note"] = note
    return row


def _vspipe(bench: Bench, plugin: str, case: str, first: int, last: int) -> tuple[int, float]:
    """(frames, seconds) that vspipe reports for rendering frames first..last to nowhere."""
    vspipe = shutil.which("vspipe") or str(Path(sys.executable).with_name("vspipe"))
    vpy = bench.script.with_suffix(".vpy")
    command = [vspipe, "-a", f"plugin={plugin}", "-a", f"case={case}"]
    command += ["-s", str(first), "-e", str(last), str(vpy), "-"]
    done = subprocess.run(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300
    )
    match = re.search(r"Output (\d+) frames in ([\d.]+) seconds \(([\d.]+) fps\)", done.stderr)
    if done.returncode != 0 or not match:
        raise RuntimeError(f"vspipe failed: {done.stderr.strip()[-300:]}")
    # The seconds are printed to 0.01 s, the rate to 0.01 fps: the time from the rate is
    # exact enough to take differences of short runs.
    frames = int(match.group(1))
    return frames, frames / float(match.group(3))


def vspipe_fps(bench: Bench, plugin: str, case: str, first: int, last: int) -> float:
    """Frames per second of vspipe rendering frames first..last of the case to nowhere.

    Timing through vspipe, not ``VideoNode.output`` in this process: the latter's Python loop
    holds the GIL for every frame, which a Python filter then waits for while native ones do
    not (measured 2026-11-30: it capped ours at about 1300 fps at every thread count).

    vspipe's time includes the first frame (CUDA context, kernel compilation), which matters
    at a few dozen fps: BM3D at radius 1 on the H200, 2026-11-30, vszipcu fast_fused 82 fps
    over 200 frames against 102 over 1000, BM3DCUDA 50 against 65. With `bench.steady_fps`
    the rate is therefore taken between two runs, frames first..last and its first quarter,
    which cancels what every run pays once; the time to the first frame is reported apart.
    """
    frames, seconds = _vspipe(bench, plugin, case, first, last)
    if not bench.steady_fps:
        return frames / seconds
    short_frames, short_seconds = _vspipe(bench, plugin, case, first, first + (last - first) // 4)
    if seconds <= short_seconds:  # too short to tell apart: the plain rate
        return frames / seconds
    return (frames - short_frames) / (seconds - short_seconds)
