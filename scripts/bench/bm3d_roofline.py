"""BM3D kernels against the H200's limits: bytes, operations and roofline bounds per frame.

    python scripts/bench/bm3d_roofline.py [--cases NAME,...] [--stages 2] [--markdown]
    python3 scripts/bench/bm3d_roofline.py --measure [--ncu] [--json out.json]   # GPU machine

Offline (no GPU): for each case (bench_bm3d.py's BM3D r0 luma, r0 YUV444, V-BM3D r1 and r2
YUV444, at its SETTINGS, 1080p and 4K) the model of ``_roofline_model.py`` per kernel role and
output frame: DRAM bytes (each buffer once), L1 / shared bytes requested, FP32, integer and
conversion lane-ops, atomics, ops per DRAM byte and the bound at each ceiling; the largest is
the role's roofline bound, and 1e6 / the frame's bound (its units' sums, frames overlapping) is
the highest rate the kernels allow.

``--measure`` builds each case's CUDA backend through the package (``CudaBackend``, the pass
bench_bm3d.py's filter makes), renders frames on one thread and times every launch with CUDA
events (steady state: a V-BM3D frame is one job per stage), and prints each role's time and
the fraction of each ceiling it reaches (the model's counts over that time). ``--ncu`` also
runs one frame per case under Nsight Compute (``ncu --clock-control none``) and reports the
counted DRAM bytes, FP32 and integer lane-ops and warp instructions against the model's.
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import _roofline_model as model
from bench_bm3d import SETTINGS, SIGMA

HERE = Path(__file__).resolve()
_SIZES = {"1080p": (1920, 1080), "4K": (3840, 2160)}
_KINDS = {"r0 luma": (False, 0), "r0 yuv444": (True, 0), "r1 yuv444": (True, 1),
          "r2 yuv444": (True, 2)}  # fmt: skip
CASES = {
    f"{kind} {size}": model.Case(
        *_SIZES[size], chroma, radius, sigma=SIGMA, settings=tuple(SETTINGS.items())
    )  # fmt: skip
    for size in _SIZES
    for kind, (chroma, radius) in _KINDS.items()
}
_ROLES = {"bm3d_load": "load", "bm3d_hard": "hard", "bm3d_wiener": "wiener",
          "bm3d_finish": "finish"}  # fmt: skip
#: Nsight Compute metrics of --ncu: time, DRAM bytes, FP32 and integer lane-ops, instructions.
NCU_METRICS = (
    "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_integer_pred_on.sum", "smsp__inst_executed.sum",
    "sm__sass_inst_executed_op_global_red.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
)  # fmt: skip


def case_model(case: model.Case, args) -> dict:
    """The model's roles of `case` (cost, bound times, bound, limiter) and the frame's total."""
    roles = model.frame_costs(case, args.group, args.centre_share)
    ceilings = args.ceilings
    out = {}
    for role, cost in roles.items():
        seconds, limiter = model.bound(cost, ceilings)
        out[role] = dict(cost=cost, times=model.bound_times(cost, ceilings), bound=seconds,
                         limiter=limiter)  # fmt: skip
    total = sum(roles.values(), model.Cost())
    times = model.bound_times(total, ceilings)
    limiter = max(times, key=times.get)
    geom = model.Geometry.of(case)
    floor = 2 * geom.spec.channels * geom.pixels * geom.itemsize  # the input once, the output once
    side, rows, _ = model.windows(geom.spec)[0]
    full = model.window_tasks(side, rows) * rows * geom.refs[0] * geom.refs[1] * geom.matched
    out["frame"] = dict(cost=total, times=times, bound=times[limiter], limiter=limiter,
                        floor=floor, full=full, in_grid=model.in_grid_candidates(geom))  # fmt: skip
    return out


def table(rows: dict, ceilings: model.Ceilings) -> str:
    """The offline table: a line per case and role, and per case its frame."""
    head = (f"{'case':16} {'role':7} {'n':>2} {'DRAM MB':>8} {'L1+sh MB':>9} {'FP32 G':>7} "
            f"{'INT G':>6} {'conv G':>6} {'atom g/s M':>11} {'op/B':>6} {'bound us':>9} limit")  # fmt: skip
    lines = [head]
    for name, roles in rows.items():
        for role, r in roles.items():
            c = r["cost"]
            atoms = f"{c.atom_global / 1e6:.1f}/{c.atom_shared / 1e6:.1f}"
            lines.append(
                f"{name:16} {role:7} {c.launches:2.0f} {c.dram / 1e6:8.1f} "
                f"{(c.l1 + c.shared) / 1e6:9.1f} {c.fp32 / 1e9:7.3f} {c.int32 / 1e9:6.3f} "
                f"{c.conv / 1e9:6.3f} {atoms:>11} {model.intensity(c):6.1f} "
                f"{r['bound'] * 1e6:9.1f} {r['limiter']}"
            )
        f = roles["frame"]
        lines.append(f"{'':16} -> {1 / f['bound']:,.0f} fps at the bound ({f['limiter']}); any "
                     f"BM3D's floor (input once, output once) {f['floor'] / 1e6:.1f} MB, "
                     f"{f['floor'] / ceilings.hbm * 1e6:.1f} us; full search {f['full'] / 1e6:.1f} M "
                     f"distances, {f['in_grid'] / 1e6:.1f} M in the grid")  # fmt: skip
    return "\n".join(lines)


def markdown(rows: dict, measured: dict | None = None) -> str:
    """docs/BENCHMARKS.md's table: computed columns, and the measured ones when given."""
    lines = ["| case | kernel | DRAM MB | L1 + shared MB | FP32 Gop | INT Gop | DRAM us | FP32 us "
             "| bound us | limit | measured us | of bound | of HBM | of FP32 | of issue |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, roles in rows.items():
        measured_roles = (measured or {}).get(name, {})
        for role, r in roles.items():
            c, t = r["cost"], r["times"]
            seconds = sum(measured_roles.values()) if role == "frame" else measured_roles.get(role)
            cells = ["", "", "", "", ""]
            if seconds:
                ratios = (r["bound"], t["dram"], t["fp32"], t["issue"])
                cells = [f"{seconds * 1e6:.0f}"] + [f"{v / seconds:.0%}" for v in ratios]
            bound = f"{r['bound'] * 1e6:.0f}"
            if role == "frame":
                bound += f" ({1 / r['bound']:,.0f} fps)"
            lines.append(
                f"| {name} | {role} | {c.dram / 1e6:.0f} | {(c.l1 + c.shared) / 1e6:.0f} | "
                f"{c.fp32 / 1e9:.2f} | {c.int32 / 1e9:.2f} | {t['dram'] * 1e6:.0f} | "
                f"{t['fp32'] * 1e6:.0f} | {bound} | {r['limiter']} | " + " | ".join(cells) + " |"
            )
    return "\n".join(lines)


# -- the GPU machine ------------------------------------------------------------------------


def _timed(backend, pool, fmt, passes, warm: int, frames: int, profile: bool) -> tuple:
    """Seconds per frame by role over `frames` frames on one thread, after `warm` frames (one
    run of consecutive frames: V-BM3D's steady state is one job per stage and frame), from
    CUDA events around every launch and accumulator memset; and the kernels' roles in launch
    order. `profile` brackets the timed frames with cuProfilerStart / Stop (``ncu
    --profile-from-start off``)."""
    import cupy
    from _gpu_timing import throughput

    npass, process = backend._passes[0], backend.process
    original, calls = npass.run, npass.calls
    original_memset = calls.memset
    driver = ctypes.CDLL("libcuda.so.1") if profile else None
    events, order, first = [], [], 100 + warm

    def timed(role: str, stream: int, launch) -> None:
        if not timing:
            return launch()
        begin, end = cupy.cuda.Event(), cupy.cuda.Event()
        cupy.cuda.runtime.eventRecord(begin.ptr, stream)
        launch()
        cupy.cuda.runtime.eventRecord(end.ptr, stream)
        events.append((role, begin, end))

    def run(name, args, stream):
        order.extend([_ROLES[name]] * bool(timing))
        timed(_ROLES[name], stream, lambda: original(name, args, stream))

    def memset(address, nbytes, stream):
        timed("memset", stream, lambda: original_memset(address, nbytes, stream))

    def frame(n, *rest):
        nonlocal timing
        timing = n >= first
        if driver and n == first:
            driver.cuProfilerStart()
        process(n, *rest)
        if driver and n == first + frames - 1:
            driver.cuProfilerStop()

    timing = False
    npass.run, calls.memset, backend.process = run, memset, frame
    try:
        throughput(backend, fmt, passes, warm + frames, 1, start=100, pool=pool)
    finally:
        del npass.run, calls.memset, backend.process
    seconds: dict[str, float] = {}
    for role, begin, end in events:
        end.synchronize()
        elapsed = cupy.cuda.get_elapsed_time(begin, end) / 1e3
        seconds[role] = seconds.get(role, 0.0) + elapsed / frames
    return seconds, order


def measure(cases: dict, frames: int, profile: bool) -> tuple[dict, dict]:
    """Seconds per frame by case and role, and each case's launch order (of the profiled
    frames when `profile`), through the backend bench_bm3d.py's filter builds (one pass)."""
    from gpu_bm3d_check import _Pool

    from avdenoise_vs._backends.cuda.backend import CudaBackend

    pools, seconds, orders = {}, {}, {}
    for name, case in cases.items():
        options, fmt = case.pass_settings()
        passes = (options,)
        backend = CudaBackend(passes, fmt, device_index=None)
        backend.warm_up()
        if fmt not in pools:  # the synthetic frames of a layout, made once
            pools[fmt] = _Pool(fmt, size=3)
        seconds[name], orders[name] = _timed(backend, pools[fmt], fmt, passes, 8, frames, profile)
        print(f"{name}: " + "  ".join(f"{k} {v * 1e6:.0f} us" for k, v in seconds[name].items()),
              flush=True)  # fmt: skip
        del backend
    return seconds, orders


def copy_bandwidth() -> float:
    """Bytes per second (read plus written) of a 1 GiB device-to-device copy, median of five."""
    import cupy

    src, dst = cupy.ones(1 << 28, cupy.float32), cupy.empty(1 << 28, cupy.float32)
    times = []
    for _ in range(6):
        begin, end = cupy.cuda.Event(), cupy.cuda.Event()
        begin.record()
        dst[...] = src
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(begin, end) / 1e3)
    return 2 * src.nbytes / sorted(times[1:])[2]


def run_ncu(names, stages: int) -> dict:
    """Nsight Compute's counts of one steady frame per case: {case: [(role, metrics)]}."""
    with tempfile.TemporaryDirectory() as folder:
        log, order_file = Path(folder) / "ncu.csv", Path(folder) / "order.json"
        command = ["ncu", "--clock-control", "none", "--profile-from-start", "off",
                   "--kernel-name", "regex:avdenoise_bm3d", "--metrics", ",".join(NCU_METRICS),
                   "--csv", "--page", "raw", "--print-units", "base", "--log-file", str(log),
                   sys.executable, str(HERE), "--ncu-child", str(order_file),
                   "--cases", ",".join(names), "--stages", str(stages)]  # fmt: skip
        subprocess.run(command, check=True)
        return parse_ncu(log.read_text(), json.loads(order_file.read_text()))


def parse_ncu(text: str, orders: dict) -> dict:
    """Rows of ``ncu --csv --page raw`` (one per profiled kernel, in launch order, after a
    header and a units row) matched to each case's roles in launch order."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = iter(r for r in csv.DictReader(lines) if r.get("ID", "").isdigit())
    return {
        name: [(role, _numbers(next(rows))) for role in roles] for name, roles in orders.items()
    }


def _numbers(row: dict) -> dict:
    return {m: float(row[m].replace(",", "") or 0) for m in NCU_METRICS if m in row}


def ncu_lines(ncu: dict, rows: dict, ceilings: model.Ceilings) -> list[str]:
    """Per case and role: measured DRAM bytes, FP32 and integer lane-ops and warp
    instructions, each against the model's and as a fraction of its ceiling."""
    lines = [f"{'case':16} {'role':7} {'ncu us':>7} {'DRAM MB':>13} {'of HBM':>6} {'FP32 G':>13} "
             f"{'of':>4} {'INT G':>13} {'warp inst M':>15} {'of issue':>8} {'SM %':>5}"]  # fmt: skip
    for name, launches in ncu.items():
        for role, m in launches:
            c = rows[name][role]["cost"] * (1 / rows[name][role]["cost"].launches)
            t = m["gpu__time_duration.sum"] / 1e9
            dram = m["dram__bytes_read.sum"] + m["dram__bytes_write.sum"]
            fp32 = sum(m[f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum"]
                       for op in ("ffma", "fadd", "fmul"))  # fmt: skip
            ints, inst = (
                m["smsp__sass_thread_inst_executed_op_integer_pred_on.sum"],
                m["smsp__inst_executed.sum"],
            )
            model_inst = (c.ops + c.memory_ops) / 32
            lines.append(
                f"{name:16} {role:7} {t * 1e6:7.0f} {dram / 1e6:6.0f}/{c.dram / 1e6:<6.0f} "
                f"{dram / t / ceilings.hbm:6.0%} {fp32 / 1e9:6.2f}/{c.fp32 / 1e9:<6.2f} "
                f"{fp32 / t / ceilings.rate(ceilings.fp32):4.0%} {ints / 1e9:6.2f}/{c.int32 / 1e9:<6.2f} "
                f"{inst / 1e6:7.1f}/{model_inst / 1e6:<7.1f} "
                f"{inst / t / ceilings.rate(ceilings.issue):8.0%} "
                f"{m['sm__throughput.avg.pct_of_peak_sustained_elapsed']:5.0f}"
            )
    return lines


def measured_lines(seconds: dict, rows: dict) -> list[str]:
    """Per case and role: measured time, the model's bound, the rates the model's counts give
    over that time (DRAM GB/s, FP32 and integer T lane-ops/s) and the fraction of each
    ceiling they reach (L1 / shared and issue too)."""
    lines = [f"{'case':16} {'role':7} {'us':>7} {'bound':>6} {'of it':>5} {'DRAM GB/s':>14} "
             f"{'FP32 T/s':>13} {'INT T/s':>13} {'L1':>5} {'issue':>5}"]  # fmt: skip
    for name, roles in seconds.items():
        for role, s in {**roles, "frame": sum(roles.values())}.items():
            r = rows[name][role]
            c, t = r["cost"], r["times"]
            rates = (f"{c.dram / s / 1e9:7.0f} ({t['dram'] / s:4.0%}) "
                     f"{c.fp32 / s / 1e12:6.2f} ({t['fp32'] / s:4.0%}) "
                     f"{c.int32 / s / 1e12:6.2f} ({t['int'] / s:4.0%}) "
                     f"{t['l1'] / s:5.0%} {t['issue'] / s:5.0%}")  # fmt: skip
            lines.append(f"{name:16} {role:7} {s * 1e6:7.0f} {r['bound'] * 1e6:6.0f} "
                         f"{r['bound'] / s:5.0%} {rates}")  # fmt: skip
    return lines


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated names")
    parser.add_argument("--stages", type=int, choices=(1, 2), default=1)
    parser.add_argument("--group", type=int, help="blocks per group (default: full groups)")
    parser.add_argument("--centre-share", type=float,
                        help="V-BM3D: share of members in the reference frame (default 1/(2r+1))")  # fmt: skip
    parser.add_argument("--hbm", type=float, default=4.8, help="HBM ceiling, TB/s")
    parser.add_argument("--clock", type=float, default=1980, help="SM clock, MHz")
    parser.add_argument("--markdown", action="store_true", help="docs/BENCHMARKS.md's table")
    parser.add_argument("--measure", action="store_true", help="time the kernels (GPU)")
    parser.add_argument("--ncu", action="store_true", help="with --measure: Nsight Compute too")
    parser.add_argument("--frames", type=int, default=12, help="timed frames per case")
    parser.add_argument("--json", help="write the model and measurements here")
    parser.add_argument("--ncu-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {', '.join(CASES)}")
    args.names = names
    args.ceilings = model.Ceilings(hbm=args.hbm * 1e12, clock=args.clock * 1e6)
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    cases = {n: dataclasses.replace(CASES[n], stages=args.stages) for n in args.names}
    if args.ncu_child:  # under ncu: one profiled frame per case, then its launch order
        _, orders = measure(cases, 1, profile=True)
        Path(args.ncu_child).write_text(json.dumps(orders))
        return
    rows = {n: case_model(c, args) for n, c in cases.items()}
    c = args.ceilings
    print(f"ceilings: HBM {c.hbm / 1e12:.1f} TB/s, FP32 {c.rate(c.fp32) / 1e12:.1f} T lane-ops/s, "
          f"INT {c.rate(c.int32) / 1e12:.1f} T/s, L1/shared {c.rate(c.l1_bytes) / 1e12:.1f} TB/s, "
          f"issue {c.rate(c.issue) / 1e12:.2f} T warp-inst/s ({c.sms} SMs at {c.clock / 1e6:.0f} MHz)")  # fmt: skip
    print(markdown(rows) if args.markdown and not args.measure else table(rows, c))
    record = {"model": {n: {role: {**vars(r["cost"]), "times_s": r["times"], "limiter": r["limiter"]}
                            for role, r in roles.items()} for n, roles in rows.items()}}  # fmt: skip
    if args.measure:
        ncu = run_ncu(args.names, args.stages) if args.ncu else None
        seconds, _ = measure(cases, args.frames, profile=False)
        print(f"device-to-device copy: {copy_bandwidth() / 1e12:.2f} TB/s read + written")
        print("\n".join(measured_lines(seconds, rows)))
        if ncu:
            print("\n".join(ncu_lines(ncu, rows, c)))
        if args.markdown:
            print(markdown(rows, seconds))
        record.update(measured_s=seconds, ncu=ncu)
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1, default=str))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
