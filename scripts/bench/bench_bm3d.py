"""BM3D speed and quality benchmark: ours against BM3DCUDA and vszipcu in one run.

    python scripts/bench/bench_bm3d.py [--cases NAME,...] [--plugins NAME,...] [--seconds 3] [--repeat N]
                                 [--append docs/BENCHMARKS.md] [--json out.json]

Case names contain commas; --cases takes the longest known name at each comma, so
``--cases "radius 0, luma,radius 1, YUV444"`` names two cases. The harness is bench_nlm.py's
(scripts/bench/_bench.py): a worker process per (plugin, case), fps timed by vspipe through
bench_bm3d.vpy (16 VapourSynth threads unless BENCH_THREADS says otherwise), and in the worker
the time to the first frame, the luma PSNR against the clean clip and the GPU memory taken.
Unlike bench_nlm.py, fps is the steady rate: the difference of two vspipe runs, so that what a
run pays once (CUDA start-up, kernel compilation) does not weigh on rates of a few dozen fps.

Source: the 1080p real-picture pan of bench_nlm.py with Gaussian noise of sigma 3 codes, as
float32 (GRAYS for luma, YUV444PS for CBM3D: the rivals accept float32 only) and, in
one case of ours alone, as GRAY8. Settings are the rivals' defaults everywhere: sigma 3,
block_step 8, bm_range 9, ps_num 2, ps_range 4; one stage (hard thresholding, no ``ref``)
unless the case says two stages.

Plugins (a column each):

source
    No filter: the ceiling of the harness.
bus
    No filter either: the source through ``core.std.GPUUpload`` and ``core.std.GPUDownload``
    (VapourSynth R80+), the frames' round trip through VapourSynth's GPU device alone, which
    the Vulkan rivals' time includes. Not a ceiling for them in one process: VapourSynth
    overlaps the round trip with a filter between its halves (docs/BENCHMARKS.md).
avdenoise
    ``avdenoise.BM3D`` (BM3DCUDA's signature, temporal aggregation inside the call); the
    two-stage case is ``avdenoise.Denoise(algorithm="bm3d", stages=2)``.
bm3dcuda
    BM3DCUDA's ``bm3dcuda.BM3D``, loaded from $BM3DCUDA_PLUGIN (set by device_setup.sh; an API3
    plugin, so VapourSynth R79 at the newest). For radius > 0 its output is a stack of
    2 (2r + 1) frame heights that still has to be aggregated; its README pairs it with
    VapourSynth-BM3D's ``bm3d.VAggregate(radius=r, sample=1)``, used when that plugin is
    loaded, and otherwise offers ``bm3dcuda.BM3Dv2``, the same filter followed by the plugin's
    own ``bm3dcuda.VAggregate`` in one call. The cell names the one used; raw stacked output
    (no PSNR) only if neither exists.
vszipcu
    ``vszipcu.BM3Dv2`` (a port of BM3DCUDA, aggregation included) at its defaults
    (num_streams=4, fast_fused off).
vszipcu_fused
    The same with ``fast_fused=True`` (collaborative filter and aggregation as one kernel
    chain), which applies to radius > 0 only.
vsfeel, bm3dvk, bm3dvk2
    The Vulkan rivals of VapourSynth R80+ (``vsfeel.BM3D`` of vapoursynth-feel,
    ``bm3dvk.BM3Dv2``, ``bm3dvk2.BM3D`` with its ``fast`` profile): each takes its clip
    through ``core.std.GPUUpload`` and returns it through ``core.std.GPUDownload``, so the
    transfers are in their time as they are in ours. bm3dvk2 takes GRAY or RGB only: its
    YUV cases are n/a.

The rivals have no integer input and no two-stage call: those cases are ours alone (n/a).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import _bench


@dataclass(frozen=True)
class Case:
    """One configuration: 1080p, `fmt` input, temporal `radius`, `chroma` for CBM3D."""

    fmt: str
    radius: int
    chroma: bool
    stages: int = 1
    ours_only: bool = False


CASES = {
    "radius 0, luma": Case("GRAYS", 0, chroma=False),
    "radius 0, YUV444": Case("YUV444PS", 0, chroma=True),
    "radius 1, YUV444": Case("YUV444PS", 1, chroma=True),
    "radius 2, YUV444": Case("YUV444PS", 2, chroma=True),
    "radius 1, YUV444, two stages": Case("YUV444PS", 1, chroma=True, stages=2, ours_only=True),
    "radius 0, luma, 8-bit input": Case("GRAY8", 0, chroma=False, ours_only=True),
}
PLUGINS = ("source", "avdenoise", "bm3dcuda", "vszipcu", "vszipcu_fused")
#: The Vulkan rivals (VapourSynth R80+), not in the default columns: R79, which BM3DCUDA needs,
#: has no GPU frames.
VULKAN = ("vsfeel", "bm3dvk", "bm3dvk2")
BUS = "bus"  # not a rival: see the module's docstring
SIGMA = 3.0  # BM3DCUDA's and vszipcu's default
NOISE = _bench.Noise("gaussian", 3.0)  # matches SIGMA: BM3D's sigma is the noise's deviation
#: The rivals' defaults, passed to every filter so that a changed default cannot skew a run.
SETTINGS = dict(block_step=8, bm_range=9, ps_num=2, ps_range=4)


def load_bm3dcuda(core) -> None:
    """Load BM3DCUDA from $BM3DCUDA_PLUGIN unless it is loaded: it is not autoloaded."""
    if not hasattr(core, "bm3dcuda"):
        path = os.environ.get("BM3DCUDA_PLUGIN")
        if not path:
            raise RuntimeError("BM3DCUDA_PLUGIN is not set (see .device/device_setup.sh)")
        core.std.LoadPlugin(path)


def _setup(core, plugin: str, case: str) -> None:
    """Load BM3DCUDA before the clock starts."""
    if plugin == "bm3dcuda" and not CASES[case].ours_only:
        load_bm3dcuda(core)


def _source(core, case: str):
    """The case's (noisy, clean) 1080p clips."""
    return _bench.make_source(core, CASES[case].fmt, 1920, 1080, NOISE)


def _ours(core, clip, case: Case):
    """avdenoise: the drop-in BM3D for one stage, Denoise for two."""
    if case.stages == 2:
        channels = "yuv" if case.chroma else "luma"
        args = dict(algorithm="bm3d", strength=SIGMA, radius=case.radius, stages=2, **SETTINGS)
        return core.avdenoise.Denoise(clip, channels=channels, **args)
    return core.avdenoise.BM3D(
        clip, sigma=SIGMA, radius=case.radius, chroma=case.chroma, **SETTINGS
    )


def _bm3dcuda(core, clip, case: Case, device_id: int | None = None):
    """BM3DCUDA, aggregated over time as its README says; returns (clip, note). `device_id`:
    its GPU (``bench_fleet.py --gpus``), None for its default."""
    args = dict(sigma=SIGMA, radius=case.radius, chroma=case.chroma, **SETTINGS)
    if device_id is not None:
        args["device_id"] = device_id
    if case.radius == 0:
        return core.bm3dcuda.BM3D(clip, **args), None
    if hasattr(core, "bm3d"):  # VapourSynth-BM3D, which the README pairs it with
        stacked = core.bm3dcuda.BM3D(clip, **args)
        return core.bm3d.VAggregate(stacked, radius=case.radius, sample=1), "bm3d.VAggregate"
    if hasattr(core.bm3dcuda, "BM3Dv2"):  # BM3D then bm3dcuda.VAggregate, in one call
        return core.bm3dcuda.BM3Dv2(clip, **args), "BM3Dv2"
    return core.bm3dcuda.BM3D(clip, **args), "raw stacked output, not aggregated"


def _vszipcu(core, clip, case: Case, fused: bool, device_id: int | None = None):
    """vszipcu's BM3Dv2, with fast_fused when `fused` (radius > 0 only), on `device_id`."""
    args = dict(sigma=SIGMA, radius=case.radius, chroma=case.chroma, **SETTINGS)
    if device_id is not None:
        args["device_id"] = device_id
    if fused:
        if case.radius == 0:
            raise RuntimeError("fast_fused applies to radius > 0 only")
        args["fast_fused"] = True
    return core.vszipcu.BM3Dv2(clip, **args)


def bus(core, clip):
    """`clip` uploaded to VapourSynth's GPU device and downloaded again, nothing between."""
    return core.std.GPUDownload(clip=core.std.GPUUpload(clip=clip))


def vulkan(core, plugin: str, clip, case: Case):
    """A Vulkan rival's one-stage BM3D of `clip`: uploaded to VapourSynth's GPU device,
    filtered, downloaded, at the same settings as every other column."""
    args = dict(sigma=SIGMA, radius=case.radius, **SETTINGS)
    if plugin == "bm3dvk2":
        if case.chroma:
            raise RuntimeError("bm3dvk2 takes GRAY or RGB, not YUV")
        args.update(profile="fast", sigma=[SIGMA], block_size=8, group_size=8)
        run = core.bm3dvk2.BM3D
    elif plugin == "bm3dvk":
        run = core.bm3dvk.BM3Dv2  # aggregated over time inside the call
        args["chroma"] = case.chroma
    elif plugin == "vsfeel":
        run = core.vsfeel.BM3D
        args["chroma"] = case.chroma
    else:
        raise ValueError(plugin)
    return core.std.GPUDownload(clip=run(core.std.GPUUpload(clip=clip), **args))


def _build(core, plugin: str, name: str, noisy):
    """The harness's build hook: (filtered clip, note)."""
    case = CASES[name]
    if plugin == "source":
        return noisy, None
    if plugin == BUS:
        return bus(core, noisy), None
    if plugin == "avdenoise":
        return _ours(core, noisy, case), None
    if case.ours_only:
        raise RuntimeError("ours only: the rivals take float32 input and run one stage a call")
    if plugin == "bm3dcuda":
        return _bm3dcuda(core, noisy, case)
    if plugin in ("vszipcu", "vszipcu_fused"):
        return _vszipcu(core, noisy, case, fused=plugin == "vszipcu_fused"), None
    if plugin in VULKAN:
        return vulkan(core, plugin, noisy, case), None
    raise ValueError(plugin)


SETTINGS_TEXT = (
    f"sigma={SIGMA}, block_step 8, bm_range 9, ps_num 2, ps_range 4, one stage unless stated, "
    f"float32 input unless stated, {NOISE.describe()}"
)
BENCH = _bench.Bench(
    script=Path(__file__).resolve(),
    title="BM3D speed",
    settings=SETTINGS_TEXT,
    cases=CASES,
    plugins=PLUGINS,
    source=_source,
    build=_build,
    setup=_setup,
    steady_fps=True,  # at a few dozen fps, what a vspipe run pays once is a large share
)

if __name__ == "__main__":
    _bench.main(BENCH, __doc__)
