"""Time the BM3D kernels under variants of their source, and compare the outputs bitwise.

Usage (on the GPU machine, from the repository root):
  python3 scripts/bench/bm3d_kernel_variants.py VARIANT CONFIGS [--root DIR] [--out DIR]
  python3 scripts/bench/bm3d_kernel_variants.py --compare DIR

VARIANT is ``key=value`` items joined by commas, or ``plain`` for the package at --root as it
is (a checkout of another commit, to compare against):
  cut=NAME[+NAME]      stop a stage early, to split its time: ``noagg`` (no aggregation),
                       ``select`` (matching and grouping only), ``search`` (matching only),
                       ``shfl`` (shuffle warp minima instead of warp reductions)
  dense=1              transform matrices with their zero entries multiplied too
CONFIGS are ``gpu_bm3d_check.py``'s names and ``r0 luma step3`` (Denoise's default step 3
and search 19), comma-separated. Each line: every kernel's GPU time per frame (CUDA events,
one thread), frames per second of the backend with 16 threads, and a digest of frames 0, 2
and 4 of a synthetic clip, whose planes go to DIR/VARIANT__CONFIG.npz. ``--compare DIR``
prints each file's largest difference from the ``plain`` one of its config. Cut variants'
outputs are not pictures.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import sys

import numpy as np

CUTS = {
    "noagg": (
        "    bm_aggregate(a, blk, group, size, c, weight, tile_sums, tile, lane);",
        "    if (weight == 12345.0f) bm_aggregate(a, blk, group, size, c, weight, tile_sums, "
        "tile, lane);",
    ),
    "search": (
        "    return bm_select<S::K>(sd, sk, bm_key(t_ref, ry, rx), (float)a.threshold, group, lane);",
        "    if (sd[lane] == 12345.0f) group[0] = 1;\n    return 0;",
    ),
    "select": (
        "    return bm_select<S::K>(sd, sk, bm_key(t_ref, ry, rx), (float)a.threshold, group, lane);",
        "    const int n = bm_select<S::K>(sd, sk, bm_key(t_ref, ry, rx), (float)a.threshold, "
        "group, lane);\n    if (n == 12345) group[0] = 1;\n    return 0;",
    ),
    "shfl": ("#if __CUDA_ARCH__ >= 800", "#if 0"),
}


def apply_variant(variant: str) -> None:
    """Set the switches and patch the device code of the imported package for `variant`."""
    if variant == "plain":
        return
    from avdenoise_vs._bm3d.cuda import source

    options = dict(item.split("=") for item in variant.split(","))
    if options.get("dense") == "1":
        source._STRUCTURAL_ZERO = -1.0
        source._tables.cache_clear()
    code = source._device_code()
    for cut in filter(None, options.get("cut", "").split("+")):
        old, new = CUTS[cut]
        if old not in code:
            raise SystemExit(f"cut {cut!r}: its line is not in the device code")
        code = code.replace(old, new)
    source._device_code = lambda: code


def configs(check) -> dict:
    """gpu_bm3d_check's configurations and Denoise's default step and search at radius 0."""
    from avdenoise_vs._params.options import Distance
    from avdenoise_vs._params.settings import Bm3dSettings, Stages

    step3 = Bm3dSettings(
        planes=(0,), distance=Distance.LUMA, plane_strengths=(3.0,), radius=0,
        stages=Stages.from_parameter(1, has_ref=False), lambda_ht=2.7, mismatch_scale=1.0,
        block_step=3, bm_range=19, ps_num=2, ps_range=4,
    )  # fmt: skip
    return {**check.CONFIGS, "r0 luma step3": (check.GRAYS, (step3,))}


def measure(variant: str, names: list[str], out: str) -> None:
    import gpu_bm3d_check as check
    from _clips import SyntheticClip, run
    from _gpu_timing import load_cupy, throughput

    from avdenoise_vs._backends.cuda.backend import CudaBackend

    check.cupy = load_cupy()
    table = configs(check)
    os.makedirs(out, exist_ok=True)
    for name in names:
        fmt, passes = table[name]
        backend = CudaBackend(passes, fmt, device_index=None)
        backend.warm_up()
        pool = check._Pool(fmt)
        throughput(backend, fmt, passes, 32, 16, start=100, pool=pool)
        kernels = check.kernel_ms(backend, fmt, passes, pool, frames=20)
        fps16 = throughput(backend, fmt, passes, 200, 16, start=1000, pool=pool)
        radius = passes[0].window_radius
        planes = sorted({p for o in passes for p in o.planes})
        clip = SyntheticClip(fmt, 5, seed=4, noise=3 / 255)
        digest, frames = hashlib.sha1(), {}
        for n in (0, 2, 4):
            got = run(backend, [clip], n, radius, planes)
            for p in planes:
                digest.update(np.ascontiguousarray(got[p]).tobytes())
                frames[f"f{n}p{p}"] = got[p]
        tag = variant.replace(",", "_").replace("=", "")
        np.savez_compressed(os.path.join(out, f"{tag}__{name.replace(' ', '_')}.npz"), **frames)
        times = " ".join(f"{k.removeprefix('bm3d_')} {v * 1000:.0f}" for k, v in kernels.items())
        print(f"{variant:28s} {name:18s} us: {times:40s} fps16 {fps16:6.0f} "
              f"sha {digest.hexdigest()[:10]}", flush=True)  # fmt: skip


def compare(folder: str) -> None:
    for path in sorted(glob.glob(os.path.join(folder, "*__*.npz"))):
        tag, config = os.path.basename(path)[:-4].split("__")
        plain = os.path.join(folder, f"plain__{config}.npz")
        if tag == "plain" or "cut" in tag or not os.path.exists(plain):
            continue
        got, want = np.load(path), np.load(plain)
        diffs = [np.abs(got[k].astype(np.float64) - want[k]) for k in want.files]
        worst = max(float(d.max()) for d in diffs)
        share = sum(int((d > 0).sum()) for d in diffs) / sum(d.size for d in diffs)
        print(f"{tag:28s} {config:20s} max |diff| {worst:.3g}, differing {share:.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant", nargs="?")
    parser.add_argument("configs", nargs="?", default="r0 luma")
    parser.add_argument("--root", default=os.getcwd(), help="the package's checkout")
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "variants"))
    parser.add_argument("--compare", metavar="DIR")
    args = parser.parse_args()
    if args.compare:
        compare(args.compare)
        return
    root = os.path.abspath(args.root)
    sys.path[:0] = [
        root,
        os.path.join(root, "scripts", "bench"),
        os.path.join(root, "tests", "cuda"),
    ]
    apply_variant(args.variant)
    measure(args.variant, args.configs.split(","), args.out)


if __name__ == "__main__":
    main()
