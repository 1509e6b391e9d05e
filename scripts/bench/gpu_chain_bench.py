"""Speed of 1080p GPU chains: ours on GPU frames between Vulkan filters, against the host's trip and vsfeel.

    python scripts/bench/gpu_chain_bench.py [--frames 600] [--cases ...] [--chains ...] [--json PATH]

Every chain starts from a CPU source (a looped 1080p pattern), takes it to VapourSynth's GPU
device with ``std.GPUUpload`` and ends with ``std.GPUDownload``; between them a Vulkan filter
of the core (``--vulkan``: the first of ``std.Convolution``, ``std.BoxBlur``,
``resize.Bicubic`` whose output of the uploaded source stays GPU resident), the denoiser, the
Vulkan filter again:

chain
    The Vulkan filters alone, no denoiser: the ceiling of every other row.
gpu
    Ours on the GPU frames: the planes imported into CUDA, never through the host.
host
    Ours on CPU frames: ``GPUDownload`` before it and ``GPUUpload`` after, what a script
    pays without GPU frames (and what VapourSynth inserts for a filter that takes none).
vsfeel
    vapoursynth-feel's filter (``vsfeel.NLMeans`` / ``vsfeel.BM3D``), all Vulkan; ``n/a``
    where it is not installed or has no such function.

Each chain runs in a process of its own (``--run``), iterating the clip's frames as vspipe
does; the table gives the steady fps (after the first frame), the wall from the process's
start to its last frame, and the first frame's time. ``--profile`` adds where the time goes:
each node's milliseconds per frame and our GPU-frame path's parts (``_chain_profile.py``). Needs VapourSynth R80+ with a Vulkan
device, CUDA on the same GPU, and this package installed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import _chain_profile

START = time.perf_counter()

CASES = {
    # name: (format, ours(core, clip), vsfeel's function and arguments)
    "NLM Y d1": ("YUV420P8", "nlm", dict(d=1, a=2, s=4, h=1.2, channels="Y")),
    # vsfeel's NLMeans takes 16-bit or float only: this row is the one with a vsfeel cell.
    "NLM Y d1 16-bit": ("YUV420P16", "nlm", dict(d=1, a=2, s=4, h=1.2, channels="Y")),
    "BM3D r0 luma": ("GRAYS", "bm3d", dict(sigma=3.0, radius=0)),
    "V-BM3D r1 luma": ("GRAYS", "bm3d", dict(sigma=3.0, radius=1)),
}
CHAINS = ("chain", "gpu", "host", "vsfeel")
VULKAN = ("std.Convolution", "std.BoxBlur", "resize.Bicubic")
#: BM3D's block settings, the rivals' defaults, given to both (bench_bm3d.py's).
BM3D_SETTINGS = dict(block_step=8, bm_range=9, ps_num=2, ps_range=4)


def _source(core, vs, fmt_name: str, frames: int):
    """A 1080p CPU clip of `frames` frames: eight distinct patterns (drawn once, then kept in
    the cache), looped."""
    import numpy as np

    fmt = core.get_video_format(getattr(vs, fmt_name))
    blank = core.std.BlankClip(format=fmt.id, width=1920, height=1080, length=8, keep=True)

    def draw(n: int, f):
        out = f.copy()
        for p in range(fmt.num_planes):
            plane = np.asarray(out[p])
            y, x = np.mgrid[: plane.shape[0], : plane.shape[1]]
            wave = 0.5 + 0.4 * np.sin(x * 0.013 + y * 0.007 + n * 0.7 + p)
            noise = np.random.default_rng(n * 3 + p).normal(0, 0.02, plane.shape)
            values = np.clip(wave + noise, 0, 1)
            if fmt.sample_type == vs.INTEGER:
                values = np.rint(values * ((1 << fmt.bits_per_sample) - 1))
            plane[...] = values
        return out

    pattern = blank.std.ModifyFrame(blank, draw)
    core.std.SetVideoCache(pattern, mode=1)  # always cached: each pattern is drawn once
    return pattern.std.Loop(times=-(-frames // 8)).std.Trim(length=frames)


def _vulkan_filter(core, name: str | None, probe):
    """The Vulkan filter of the chains, as a function of a clip: the first that keeps `probe`
    (the uploaded source) on the GPU."""
    names = [name] if name else list(VULKAN)
    for candidate in names:
        namespace, function = candidate.split(".")
        run = getattr(getattr(core, namespace, None), function, None)
        if run is None:
            continue

        def apply(clip, run=run, function=function):
            if function == "Convolution":
                return run(clip, matrix=[1, 2, 1, 2, 4, 2, 1, 2, 1])
            if function == "BoxBlur":
                return run(clip, hradius=1, vradius=1)
            return run(clip)  # a resize to the same size and format: a Vulkan pass

        if apply(probe).gpu_resident:
            return candidate, apply
    raise RuntimeError(f"none of {names} keeps a GPU clip on the GPU here")


def _ours(core, clip, kind: str, args: dict):
    if kind == "nlm":
        return core.avdenoise.NLMeans(clip, **args)
    return core.avdenoise.BM3D(clip, **args, **BM3D_SETTINGS)


def _vsfeel(core, clip, kind: str, args: dict):
    """vsfeel's filter, given the arguments its signature has."""
    plugin = getattr(core, "vsfeel", None)
    if plugin is None:
        raise LookupError("vsfeel is not installed")
    names = ("NLMeans", "KNLMeansCL", "NLM") if kind == "nlm" else ("BM3D", "BM3Dv2")
    run = next((getattr(plugin, n) for n in names if hasattr(plugin, n)), None)
    if run is None:
        raise LookupError(f"vsfeel has none of {names}")
    wanted = {**args, **(dict(BM3D_SETTINGS, chroma=False) if kind == "bm3d" else {})}
    accepted = {part.split(":")[0] for part in run.signature.split(";") if part}
    return run(clip, **{k: v for k, v in wanted.items() if k in accepted})


def build(core, vs, case: str, chain: str, frames: int, vulkan: str | None):
    """The chain's output clip (CPU frames, downloaded), the Vulkan filter's name and the
    chain's nodes by role (for ``--profile``)."""
    fmt_name, kind, args = CASES[case]
    up, down = core.std.GPUUpload, core.std.GPUDownload
    nodes = {"source": _source(core, vs, fmt_name, frames)}
    nodes["upload"] = up(nodes["source"])
    name, apply = _vulkan_filter(core, vulkan, nodes["upload"])
    middle = nodes["before"] = apply(nodes["upload"])
    if chain == "gpu":
        middle = nodes["ours"] = _ours(core, middle, kind, args)
        if not middle.gpu_resident:
            raise RuntimeError("ours returned a CPU clip: this bridge takes no GPU clips")
    elif chain == "host":
        nodes["download_in"] = down(middle)
        nodes["ours"] = _ours(core, nodes["download_in"], kind, args)
        middle = nodes["upload_out"] = up(nodes["ours"])
    elif chain == "vsfeel":
        middle = nodes["vsfeel"] = _vsfeel(core, middle, kind, args)
    elif chain != "chain":
        raise ValueError(chain)
    nodes["after"] = apply(middle)
    nodes["download"] = down(nodes["after"])
    return nodes["download"], name, nodes


def run_one(
    case: str, chain: str, frames: int, threads: int, vulkan: str | None, profile: bool = False
) -> dict:
    """One chain in this process: its timings, or why it cannot run; with `profile`, where
    the time goes (``_chain_profile``)."""
    import vapoursynth as vs

    core = vs.core
    if threads:
        core.num_threads = threads
    clock = None
    if profile:
        core.timings.enabled = True
        if chain == "gpu":
            clock = _chain_profile.PathClock()
            clock.install()
    try:
        clip, filter_name, nodes = build(core, vs, case, chain, frames, vulkan)
    except LookupError as error:
        return {"case": case, "chain": chain, "skip": str(error)}
    built = time.perf_counter()
    times = []
    for frame in clip.frames():
        times.append(time.perf_counter())
        del frame
    first, end = times[0], times[-1]
    row = {
        "case": case, "chain": chain, "frames": len(times), "vulkan": filter_name,
        "fps": (len(times) - 1) / (end - first) if len(times) > 1 else float("nan"),
        "wall_s": end - START, "first_frame_s": first - built, "threads": core.num_threads,
    }  # fmt: skip
    if profile:
        row["profile"] = {"nodes": _chain_profile.node_ms(nodes, len(times))}
        if clock is not None:
            row["profile"]["path"] = clock.per_frame(len(times))
    return row


def _worker(case: str, chain: str, args) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--run", case, chain,
               "--frames", str(args.frames), "--threads", str(args.threads)]  # fmt: skip
    if args.profile:
        command.append("--profile")
    if args.vulkan:
        command += ["--vulkan", args.vulkan]
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"case": case, "chain": chain, "error": why}
    return json.loads(lines[-1])


def _cell(row: dict) -> str:
    if "fps" in row:
        return f"{row['fps']:8.1f} {row['wall_s']:8.2f} {row['first_frame_s']:8.2f}"
    return f"n/a ({row.get('skip') or row.get('error')})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="gpu_chain_bench.py", description=__doc__.split("\n\n")[0].strip()
    )
    parser.add_argument("--frames", type=int, default=600, help="frames per chain (600)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"of {list(CASES)}")
    parser.add_argument("--chains", default=",".join(CHAINS), help=f"of {list(CHAINS)}")
    parser.add_argument("--threads", type=int, default=0, help="core threads (0: the core's)")
    parser.add_argument("--vulkan", help=f"the Vulkan filter, e.g. {VULKAN[0]} (default: the "
                        "first of them that keeps GPU clips on the GPU)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=600, help="seconds per chain (600)")
    parser.add_argument("--profile", action="store_true", help="also each node's ms per frame "
                        "and, on GPU frames, our frame path's parts (_chain_profile.py)")  # fmt: skip
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("--run", nargs=2, metavar=("CASE", "CHAIN"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:  # a worker: one chain, one JSON line
        row = run_one(*args.run, args.frames, args.threads, args.vulkan, args.profile)
        print(json.dumps(row))
        return 0
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    chains = [c.strip() for c in args.chains.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES] + [c for c in chains if c not in CHAINS]
    if unknown:
        parser.error(f"unknown cases or chains: {unknown}")
    rows = []
    print(f"1080p, {args.frames} frames a chain; fps (steady), wall s, first frame s")
    print(f"{'case':<16} {'chain':<7} {'fps':>8} {'wall':>8} {'first':>8}")
    for case in cases:
        for chain in chains:
            row = _worker(case, chain, args)
            rows.append(row)
            print(f"{case:<16} {chain:<7} {_cell(row)}", flush=True)
            if "profile" in row:
                print(f"    ms/frame: {_chain_profile.line(row['profile'])}", flush=True)
    filters = {row["vulkan"] for row in rows if "vulkan" in row}
    print(f"Vulkan filter: {', '.join(sorted(filters)) or 'none ran'}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"frames": args.frames, "rows": rows}, indent=2) + "\n")
    return 0 if any("fps" in row for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
