"""NLM speed and quality benchmark: ours against every rival that is installed, in one run.

    python scripts/bench_nlm.py [--cases NAME,...] [--plugins NAME,...] [--seconds 3]
                                [--append docs/BENCHMARKS.md] [--json out.json]

Each (plugin, case) runs in its own process (so GPU memory is per filter and a crash stays
contained) on a 1080p (or 4K) clip made from a real picture panning across the frame, with
noise added by a native expression: the source costs no Python time, so the numbers measure
the denoisers. fps is timed by vspipe, as users run filters; time to the first frame, PSNR
and GPU memory are measured in the worker process. Equal parameters everywhere (d, a, s, h, channels); vsavd takes only the
radii and strength it understands. The table lists fps, time to the first frame, PSNR of the
luma against the clean clip and GPU memory of the process.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: name -> (format name, width, height, d, a, s, channels: "Y" or "YUV")
CASES = {
    "Y d1 a2 s4": ("YUV420P8", 1920, 1080, 1, 2, 4, "Y"),
    "YUV444 joint d1 a2 s4": ("YUV444P8", 1920, 1080, 1, 2, 4, "YUV"),
    "Y d2 a4 s4": ("YUV420P8", 1920, 1080, 2, 4, 4, "Y"),
    "Y d0 a2 s4": ("YUV420P8", 1920, 1080, 0, 2, 4, "Y"),
    "Y d1 a2 s4 10-bit": ("YUV420P10", 1920, 1080, 1, 2, 4, "Y"),
    "Y d1 a2 s4 16-bit": ("YUV420P16", 1920, 1080, 1, 2, 4, "Y"),
    "Y d1 a2 s4 4K": ("YUV420P8", 3840, 2160, 1, 2, 4, "Y"),
}
PLUGINS = ("source", "avdenoise", "vszipcu", "knlm", "nlm_cuda", "vsavd")
STRENGTH = 2.4
NOISE = 12.0  # peak-to-peak of the uniform noise, in 8-bit codes


def make_source(core, fmt_name: str, width: int, height: int):
    """(noisy, clean) clips: 24 crops of an upscaled real picture panning, looped."""
    import numpy as np
    import vapoursynth as vs

    sys.path.insert(0, str(ROOT))
    from avdenoise_vs.sample import _picture

    picture = _picture()
    blank = core.std.BlankClip(width=picture.shape[1], height=picture.shape[0],
                               format=vs.RGB24, length=1)

    def fill(n, f):
        out = f.copy()
        for p in range(3):
            np.asarray(out[p])[...] = picture[..., p]
        return out

    rgb = core.std.ModifyFrame(blank, blank, fill)
    big = core.resize.Bicubic(rgb, width + 96, height + 48, format=getattr(vs, fmt_name),
                              matrix_s="709")
    crops = [core.std.CropAbs(big, width, height, left=4 * n, top=2 * n) for n in range(24)]
    clean = core.std.Splice(crops)
    fmt = clean.format
    peak = (1 << fmt.bits_per_sample) - 1
    mid, amplitude = (peak + 1) // 2, NOISE / 255 * peak
    rng = np.random.default_rng(0)

    def fill_noise(n, f):
        out = f.copy()
        for p in range(fmt.num_planes):
            plane = np.asarray(out[p])
            plane[...] = np.rint(mid + rng.uniform(-amplitude / 2, amplitude / 2, plane.shape))
        return out

    # One noise frame, rendered once and cached, cropped at a different offset per frame:
    # the looped source then costs no Python time per frame.
    blank_noise = core.std.BlankClip(big, length=1)
    noise = core.std.ModifyFrame(blank_noise, blank_noise, fill_noise)
    noise = core.std.Splice([core.std.CropAbs(noise, width, height, left=(36 * n) % 96,
                                              top=(18 * n) % 48) for n in range(24)])
    noisy = core.std.Expr([clean, noise], [f"x y + {mid} -"] * fmt.num_planes)
    return core.std.Loop(noisy, times=400), core.std.Loop(clean, times=400)


def build_filter(core, plugin: str, clip, d: int, a: int, s: int, channels: str):
    h = STRENGTH
    if plugin == "source":
        return clip
    if plugin == "avdenoise":
        mode = "luma" if channels == "Y" else "yuv"
        return core.avdenoise.Denoise(clip, radius=d, search_radius=a, patch_radius=s,
                                      strength=h, channels=mode)
    if plugin == "vszipcu":
        return core.vszipcu.NLMeans(clip, d=d, a=a, s=s, h=h, channels=channels, num_streams=4)
    if plugin == "knlm":
        return core.knlm.KNLMeansCL(clip, d=d, a=a, s=s, h=h, channels=channels,
                                    device_type="gpu")
    if plugin == "nlm_cuda":
        return core.nlm_cuda.NLMeans(clip, d=d, a=a, s=s, h=h, channels=channels)
    if plugin == "vsavd":
        if channels != "Y":
            raise RuntimeError("joint YUV not offered")
        import vsavd  # noqa: F401  (its plugin registers when the package is imported)

        return core.avd.NLMeans(clip, strength=h, search_radius=a, patch_radius=s,
                                temporal_radius=d, channel_mode="luma")
    raise ValueError(plugin)


def gpu_memory_used() -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
    except Exception:
        return None


def run_worker(plugin: str, case: str, seconds: float) -> dict:
    """Time one filter in this process; return its row."""
    import numpy as np
    import vapoursynth as vs

    sys.path.insert(0, str(ROOT))
    from avdenoise_vs.sample import psnr

    memory_before = gpu_memory_used()
    core = vs.core
    core.num_threads = int(os.environ.get("BENCH_THREADS", "16"))
    fmt_name, width, height, d, a, s, channels = CASES[case]
    noisy, clean = make_source(core, fmt_name, width, height)
    start = time.perf_counter()
    out = build_filter(core, plugin, noisy, d, a, s, channels)
    out.get_frame(0)
    first_frame = time.perf_counter() - start
    peak = (1 << clean.format.bits_per_sample) - 1
    quality = float(np.mean([psnr(np.asarray(out.get_frame(n)[0]),
                                  np.asarray(clean.get_frame(n)[0]), peak) for n in (3, 9, 15)]))
    probe = min(96, out.num_frames)
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        out[:probe].output(sink)
    estimate = probe / (time.perf_counter() - t0)
    frames = int(min(out.num_frames - probe, max(200, 2 * estimate * seconds)))
    fps = vspipe_fps(plugin, case, probe, probe + frames - 1)
    memory_after = gpu_memory_used()
    memory = None if memory_before is None else (memory_after - memory_before) / 2**20
    return dict(plugin=plugin, case=case, fps=fps, frames=frames, first_frame_s=first_frame,
                psnr=quality, gpu_mib=memory)


def vspipe_fps(plugin: str, case: str, first: int, last: int) -> float:
    """Frames per second of vspipe rendering frames first..last of the case to nowhere.

    Timing through vspipe, not ``VideoNode.output`` in this process: the latter's Python loop
    holds the GIL for every frame, which a Python filter then waits for while native ones do
    not (measured 2026-11-30: it capped ours at about 1300 fps at every thread count).
    """
    vspipe = shutil.which("vspipe") or str(Path(sys.executable).with_name("vspipe"))
    command = [vspipe, "-a", f"plugin={plugin}", "-a", f"case={case}", "-s", str(first),
               "-e", str(last), str(ROOT / "scripts" / "bench_nlm.vpy"), "-"]
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, timeout=300)
    match = re.search(r"Output (\d+) frames in ([\d.]+) seconds", done.stderr)
    if done.returncode != 0 or not match:
        raise RuntimeError(f"vspipe failed: {done.stderr.strip()[-300:]}")
    return int(match.group(1)) / float(match.group(2))


def run_all(cases, plugins, seconds: float) -> list[dict]:
    rows = []
    for case in cases:
        for plugin in plugins:
            command = [sys.executable, __file__, "--worker", plugin, case, "--seconds",
                       str(seconds)]
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
            if done.returncode == 0 and lines:
                rows.append(json.loads(lines[-1]))
            else:
                reason = (done.stderr.strip().splitlines() or ["failed"])[-1][:120]
                rows.append(dict(plugin=plugin, case=case, error=reason))
            print(format_row(rows[-1]), flush=True)
    return rows


def format_row(row: dict) -> str:
    if "error" in row:
        return f"{row['case']:<24} {row['plugin']:<10} n/a ({row['error']})"
    memory = "?" if row["gpu_mib"] is None else f"{row['gpu_mib']:.0f}"
    return (f"{row['case']:<24} {row['plugin']:<10} {row['fps']:8.1f} fps  first "
            f"{row['first_frame_s']:6.2f} s  PSNR {row['psnr']:6.2f}  GPU {memory} MiB")


def markdown(rows: list[dict], cases, plugins, header: str) -> str:
    lines = [header, "", "| config | " + " | ".join(plugins) + " |",
             "|---|" + "---|" * len(plugins)]
    for case in cases:
        cells = []
        for plugin in plugins:
            row = next(r for r in rows if r["case"] == case and r["plugin"] == plugin)
            if "error" in row:
                cells.append("n/a")
            else:
                memory = "" if row["gpu_mib"] is None else f", {row['gpu_mib']:.0f} MiB"
                cells.append(f"{row['fps']:.0f} fps ({row['psnr']:.2f} dB{memory})")
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", nargs=2, metavar=("PLUGIN", "CASE"))
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--plugins", default=",".join(PLUGINS))
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--append", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(run_worker(*args.worker, args.seconds)))
        return
    cases = [c for c in args.cases.split(",") if c]
    plugins = [p for p in args.plugins.split(",") if p]
    rows = run_all(cases, plugins, args.seconds)
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()
    except FileNotFoundError:
        gpu = "no GPU"
    header = (f"### NLM speed, {datetime.date.today()}, {gpu}, "
              f"{os.environ.get('BENCH_THREADS', '16')} VapourSynth threads, h={STRENGTH}, "
              f"uniform noise {NOISE} codes p-p; cells: fps (luma PSNR vs clean, GPU memory)")
    table = markdown(rows, cases, plugins, header)
    print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.append:
        with args.append.open("a") as f:
            f.write("\n" + table)


if __name__ == "__main__":
    main()
