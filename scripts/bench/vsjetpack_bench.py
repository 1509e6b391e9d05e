"""vsjetpack's vsdenoise.nl_means and vsdenoise.bm3d through avdenoise_vs.vsjetpack and vszipcu.

    python scripts/bench/vsjetpack_bench.py [--device cuda] [--width 1920] [--height 1080]
        [--frames 1200] [--cases NAME,...] [--backends avdenoise,vszipcu] [--h 1.2] [--sigma 3]
        [--threads N] [--json out.json]
    python scripts/bench/vsjetpack_bench.py --device cpu --width 64 --height 48 --frames 3

The same vsdenoise call runs with ``backend=avdenoise_vs.vsjetpack.Backend(device)`` (column
avdenoise) and with the backend vsjetpack picks for vszipcu (column vszipcu:
``nl_means.Backend.CUDA``, ``bm3d.Backend.CUDA_ZIP``; n/a where vszipcu is not installed).
For the speed, vspipe renders frames 0..N-1 of the call to nowhere, this script being the
VapourSynth script (``-a config=JSON``), as users run filters: "fps" is N frames over vspipe's
time, the filter's start (CUDA context, kernel compilation) included; "steady fps" leaves that
out, as the difference of that run and one of its first quarter (from 8 frames). PSNR: the
filtered planes of frames 0, N/2 and N-1 against the clean source, in this process.

Source: scripts/_bench.py's 1080p real-picture pan with Gaussian noise of deviation 3 codes.
bm3d takes float32 clips only with a plugin other than vsjetpack's CPU one, hence its formats.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

SCRIPT = Path(__file__).resolve()  # vspipe runs it by this path: it changes directory first
HERE = SCRIPT.parent
# _bench.py is beside this file or in the folder above it; the package in the checkout.
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parents[1])]

import _bench  # noqa: E402

NOISE = _bench.Noise("gaussian", 3.0)


class Case(NamedTuple):
    """One vsdenoise call: `function` on `fmt`, `args` besides the strength; `planes` those it
    filters (PSNR's). A NamedTuple, not a dataclass: vspipe's script is no module of
    sys.modules, where a dataclass looks."""

    function: str
    fmt: str
    args: dict
    planes: tuple[int, ...] = (0, 1, 2)
    text: str = ""


CASES = {
    "nlm-yuv420": Case("nl_means", "YUV420P16", {}, text="nl_means(clip, h), all planes"),
    "nlm-chroma": Case(
        "nl_means", "YUV420P16", dict(planes=[1, 2]), (1, 2), "nl_means(clip, h, planes=[1, 2])"
    ),
    "bm3d-fast-yuv420": Case("bm3d", "YUV420PS", dict(tr=1), text="bm3d(clip, sigma, tr=1)"),
    "bm3d-np-yuv444": Case(
        "bm3d", "YUV444PS", dict(tr=1, profile="np"), text="bm3d(..., tr=1, profile=NORMAL)"
    ),
}
BACKENDS = ("avdenoise", "vszipcu")


def build(core, config: dict):
    """The case's (filtered, noisy, clean) clips through the backend that `config` names."""
    import vsdenoise

    from avdenoise_vs.vsjetpack import Backend

    case = CASES[config["case"]]
    noisy, clean = _bench.make_source(core, case.fmt, config["width"], config["height"], NOISE)
    args = dict(case.args)
    if case.function == "bm3d":
        profile = vsdenoise.bm3d.Profile(args.get("profile", "fast"))
        args.update(sigma=config["sigma"], profile=profile)
    else:
        args["h"] = config["h"]
    if config["backend"] == "avdenoise":
        backend = Backend(config["device"])
    elif not hasattr(core, "vszipcu"):
        raise RuntimeError("vszipcu is not installed")
    elif case.function == "bm3d":
        backend = vsdenoise.bm3d.Backend.CUDA_ZIP
    else:
        backend = vsdenoise.nl_means.Backend.CUDA
    out = getattr(vsdenoise, case.function)(noisy, backend=backend, **args)
    return out, noisy, clean


def psnr(out, clean, planes: tuple[int, ...]) -> float:
    """Mean PSNR over frames 0, N/2 and N-1 of the `planes` of `out` against `clean`."""
    import numpy as np
    import vapoursynth as vs

    from avdenoise_vs.sample import psnr as plane_psnr

    fmt = clean.format
    peak = 1.0 if fmt.sample_type == vs.FLOAT else (1 << fmt.bits_per_sample) - 1
    scores = []
    for n in sorted({0, out.num_frames // 2, out.num_frames - 1}):
        got, want = out.get_frame(n), clean.get_frame(n)
        a = np.concatenate([np.asarray(got[p]).ravel() for p in planes])
        b = np.concatenate([np.asarray(want[p]).ravel() for p in planes])
        scores.append(plane_psnr(a, b, peak))
    return float(np.mean(scores))


def vspipe_seconds(config: dict, frames: int) -> float:
    """Seconds vspipe takes to render frames 0..frames-1 of the configured call."""
    sibling = Path(sys.executable).with_name("vspipe")
    vspipe = str(sibling) if sibling.exists() else shutil.which("vspipe") or "vspipe"
    config_arg = f"config={json.dumps(config)}"
    command = [vspipe, "-a", config_arg, "-e", str(frames - 1), str(SCRIPT), "-"]
    done = subprocess.run(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600
    )
    match = re.search(r"Output (\d+) frames in [\d.]+ seconds \(([\d.]+) fps\)", done.stderr)
    if done.returncode != 0 or not match:
        raise RuntimeError((done.stderr.strip().splitlines() or ["vspipe failed"])[-1])
    # The rate has more digits than the seconds: the time from it.
    return int(match.group(1)) / float(match.group(2))


def measure(core, config: dict, frames: int) -> dict:
    """One (backend, case) row: fps, steady fps, PSNR, or why it is n/a."""
    row = {"case": config["case"], "backend": config["backend"], "frames": frames}
    planes = CASES[config["case"]].planes
    try:
        out, noisy, clean = build(core, config)
        row["psnr"] = psnr(out[:frames], clean[:frames], planes)
        row["noisy_psnr"] = psnr(noisy[:frames], clean[:frames], planes)
        seconds = vspipe_seconds(config, frames)
        row["fps"] = frames / seconds
        if frames >= 8:  # the rate past the first quarter (see the docstring)
            quarter = frames // 4
            rest = seconds - vspipe_seconds(config, quarter)
            if rest > 0:
                row["steady_fps"] = (frames - quarter) / rest
    except Exception as error:  # the cell says why, the other cells still run
        row["error"] = f"{type(error).__name__}: {error}"[:200]
    return row


def table(rows: list[dict], args) -> str:
    """The rows as a short text table."""
    lines = [
        f"vsjetpack through avdenoise ({args.device}) and vszipcu, {args.width}x{args.height}, "
        f"{args.frames} frames, h={args.h}, sigma={args.sigma}, {NOISE.describe()}",
        f"{'case':<18}{'backend':<11}{'fps':>9}{'steady fps':>12}{'PSNR':>8}{'noisy':>8}  call",
    ]
    for row in rows:
        head = f"{row['case']:<18}{row['backend']:<11}"
        if "error" in row:
            lines.append(f"{head}n/a ({row['error']})")
            continue
        steady = f"{row['steady_fps']:12.1f}" if "steady_fps" in row else f"{'-':>12}"
        lines.append(
            f"{head}{row['fps']:9.1f}{steady}{row['psnr']:8.2f}{row['noisy_psnr']:8.2f}  "
            f"{CASES[row['case']].text}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="avdenoise's device (Denoise's values)")
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=1080)
    parser.add_argument("--frames", type=int, default=1200, help="frames vspipe renders a cell")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--h", type=float, default=1.2, help="nl_means strength")
    parser.add_argument("--sigma", type=float, default=3.0, help="bm3d strength")
    parser.add_argument("--threads", type=int, default=0, help="core.num_threads (0: default)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.cases.split(",")) - set(CASES))
    if unknown:
        parser.error(f"unknown cases {unknown} (known: {', '.join(CASES)})")
    if args.frames < 1:
        parser.error(f"--frames must be at least 1, got {args.frames}")
    import vapoursynth as vs

    core = vs.core
    if args.threads:
        core.num_threads = args.threads
    settings = dict(width=args.width, height=args.height, device=args.device, h=args.h)
    settings.update(sigma=args.sigma, threads=args.threads)
    rows = []
    for case in args.cases.split(","):
        for backend in args.backends.split(","):
            rows.append(measure(core, dict(settings, case=case, backend=backend), args.frames))
            print(table(rows[-1:], args).splitlines()[-1], flush=True)
    print(table(rows, args))
    if args.json:
        args.json.write_text(
            json.dumps(dict(settings=settings, frames=args.frames, rows=rows), indent=1)
        )
    return rows


def _output(config: dict) -> None:
    """As vspipe's script: the configured call is the output."""
    import vapoursynth as vs

    if config["threads"]:
        vs.core.num_threads = config["threads"]
    build(vs.core, config)[0].set_output()


if __name__ == "__vapoursynth__":
    _output(json.loads(globals()["config"]))
elif __name__ == "__main__":
    main()
