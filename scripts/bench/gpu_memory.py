"""Where a lone worker's GPU memory goes: the process total and what our backend holds, per BM3D case.

    python scripts/bench/run.py gpu_memory [--cases "radius 0, luma,radius 1, YUV444"] [--frames 240]

Each case (bench_bm3d.py's names, 1080p) renders `--frames` frames in a process of its own, as
a fleet worker does, then reports the process's GPU memory as nvidia-smi sees it and its
parts: the CUDA context alone (a process that only creates one, measured first), the frame
cache's slots, the output buffers (the gate's, or one per thread), the passes' own buffers
(BM3D workspaces and accumulators) and CuPy's memory pool. The difference between the total
and the named parts is the context's growth (modules, streams) and the pool's rounding. Needs
a CUDA GPU, nvidia-smi and this package.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time

MIB = 1 << 20


def process_mib(pid: int) -> float | None:
    """GPU memory of process `pid` as nvidia-smi lists it, MiB; None where it is not listed."""
    query = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
    try:
        listing = subprocess.run(query, capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in listing.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) == 2 and fields[0] == str(pid):
            return float(fields[1])
    return None


def context_only() -> dict:
    """This process with a CUDA context and nothing else."""
    import cupy

    cupy.zeros(1)
    return {"case": "context only", "process_mib": process_mib(os.getpid())}


def backend_parts(backend) -> dict:
    """What one CudaBackend holds, MiB."""
    parts = {f"{name}_mib": size / MIB for name, size in backend.memory_parts().items()}
    return parts | {"slot_mib": backend._slots.nbytes / MIB}


def run_case(case: str, frames: int) -> dict:
    """Render `frames` frames of `case` here, then measure."""
    sys.path[:0] = [os.path.dirname(os.path.abspath(__file__))]
    from _bench import render
    from bench_bm3d import BENCH

    from avdenoise_vs._backends.cuda.backend import CudaBackend

    clip = render(BENCH, "avdenoise", case)
    start = time.perf_counter()
    for done, _ in enumerate(clip.frames(), 1):
        if done >= frames:
            break
    row = {"case": case, "fps": frames / (time.perf_counter() - start)}
    row["process_mib"] = process_mib(os.getpid())
    backends = [o for o in gc.get_objects() if isinstance(o, CudaBackend)]
    for backend in backends:
        for key, value in backend_parts(backend).items():
            row[key] = row.get(key, 0.0) + value
    import cupy

    row["pool_mib"] = cupy.get_default_memory_pool().total_bytes() / MIB
    return row


def in_child(args: list[str], timeout: float) -> dict:
    """Run this script with `args` in a fresh process; its one JSON line, or the error."""
    command = [sys.executable, os.path.abspath(__file__), *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1][:200]}
    return json.loads(lines[-1])


def split_cases(text: str) -> list[str]:
    """bench_bm3d.py's case names from one comma-separated option: each starts at 'radius'."""
    return ["radius" + part.rstrip().rstrip(",") for part in text.split("radius") if part.strip()]


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table, MiB rounded."""
    columns = ("case", "fps", "process_mib", "cache_mib", "outs_mib", "passes_mib", "pool_mib")
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        if "error" in row:  # the case's process failed: say why in the first column after it
            cells = [row["case"], row["error"], *[None] * (len(columns) - 2)]
        else:
            cells = [row.get(column) for column in columns]
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return "\n".join(lines)


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.0f}"
    return "n/a" if value is None else str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--cases",
        default="radius 0, luma,radius 0, YUV444,radius 1, YUV444",
        help="bench_bm3d.py case names, comma-separated",
    )
    parser.add_argument("--frames", type=int, default=240, help="frames per case (240)")
    parser.add_argument("--timeout", type=float, default=60, help="seconds per case (60)")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--child", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:  # one measurement, in this fresh process
        row = context_only() if not args.child else run_case(args.child[0], args.frames)
        print(json.dumps(row))
        return 0
    cases = split_cases(args.cases)
    rows = [in_child(["--child"], args.timeout) | {"case": "context only"}]
    rows += [
        in_child(["--frames", str(args.frames), "--child", case], args.timeout) | {"case": case}
        for case in cases
    ]
    print(table(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
