"""The cases of ``bench_fleet.py``: what each (case, plugin) worker renders, through ``bench_fleet.vpy``.

Sources and rival filters are ``bench_nlm.py``'s and ``bench_bm3d.py``'s (scripts/bench/_bench.py):
a real picture panning with noise added by a native expression, so that the source costs no
Python per frame, and the rivals at the settings those benchmarks give them. Ours is built
here, because a worker must be able to force ``device="cpu"`` (the tests run a fleet on a
machine without a GPU). The plugin ``source`` is the unfiltered clip: the harness's ceiling;
``bus`` the same through ``std.GPUUpload`` and ``std.GPUDownload`` (R80+): the frames' round trip
through VapourSynth's GPU device alone, what the Vulkan rivals' transfers cost.

BM3DCUDA at a radius is aggregated as bench_bm3d.py does it: ``bm3d.VAggregate`` when
VapourSynth-BM3D is loaded, else ``bm3dcuda.BM3Dv2`` (the same filter and the plugin's own
aggregation in one call); its raw stacked output, not a picture, is n/a.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import _bench
import bench_bm3d
import bench_nlm

__all__ = [
    "BUS",
    "CASES",
    "OURS",
    "RIVALS",
    "SOURCE",
    "SOURCE_FRAMES",
    "UNFILTERED",
    "Case",
    "render",
    "select",
]

OURS = "avdenoise"
SOURCE = "source"
BUS = bench_bm3d.BUS  # the source through VapourSynth's GPU device and back (R80+)
#: Columns that filter nothing: never a rival.
UNFILTERED = (SOURCE, BUS)
#: Every rival column, in the order the table shows them.
RIVALS = ("vszipcu", "vszipcu_fused", "bm3dcuda", "knlm", "nlm_cuda", *bench_bm3d.VULKAN)
#: Frames of :func:`_bench.make_source`'s clip (24 pictures looped 400 times).
SOURCE_FRAMES = 24 * 400
#: NLM settings of every NLM pass: KNLMeansCL's d, a, s, and bench_nlm.py's strength.
NLM = dict(d=1, a=2, s=4)

#: ``build(core, plugin, noisy, device, device_id)`` returns the clip a worker outputs; `device`
#: is ours, `device_id` the rivals' GPU (None: their default), since they do not spread a fleet
#: over several GPUs by themselves.
Build = Callable[[object, str, object, str, int | None], object]


@dataclass(frozen=True)
class Case:
    """One row of the table.

    Attributes
    ----------
    fmt : str
        VapourSynth format of the source, e.g. ``"YUV420P8"``.
    noise : _bench.Noise
        The noise added to the clean clip.
    rivals : tuple of str
        Rival plugins that run this case (a subset of :data:`RIVALS`).
    build : callable
        See :data:`Build`.
    """

    fmt: str
    noise: _bench.Noise
    rivals: tuple[str, ...]
    build: Build

    @property
    def y4m(self) -> bool:
        """Whether workers write y4m: it has no float formats, so float cases write raw frames."""
        return not self.fmt.endswith(("S", "H"))


def _nlm_ours(core, clip, channels: str, device: str):
    """Our NLM (``Denoise``, as bench_nlm.py runs it) with KNLMeansCL's `channels`."""
    mode = {"Y": "luma", "UV": "chroma", "YUV": "yuv"}[channels]
    return core.avdenoise.Denoise(
        clip,
        radius=NLM["d"],
        search_radius=NLM["a"],
        patch_radius=NLM["s"],
        strength=bench_nlm.STRENGTH,
        channels=mode,
        device=device,
    )


def _nlm(core, plugin: str, clip, channels: str, device: str, device_id: int | None = None):
    """`plugin`'s NLM of `clip`: ours here, the rivals (and ``source``) as bench_nlm.py's."""
    if plugin == OURS:
        return _nlm_ours(core, clip, channels, device)
    return bench_nlm.build_filter(
        core, plugin, clip, NLM["d"], NLM["a"], NLM["s"], channels, device_id
    )


def _bm3d(core, plugin: str, clip, case: bench_bm3d.Case, device: str, device_id=None):
    """`plugin`'s one-stage BM3D of `clip` at BM3DCUDA's defaults (bench_bm3d.py's settings)."""
    if plugin == SOURCE:
        return clip
    if plugin == OURS:
        settings = bench_bm3d.SETTINGS
        return core.avdenoise.BM3D(
            clip,
            sigma=bench_bm3d.SIGMA,
            radius=case.radius,
            chroma=case.chroma,
            device=device,
            **settings,
        )
    if plugin == "bm3dcuda":
        bench_bm3d.load_bm3dcuda(core)
        out, note = bench_bm3d._bm3dcuda(core, clip, case, device_id)
        if note is not None and note.startswith("raw"):
            # A stack of 2 (2r + 1) frames, not a picture: nothing comparable to time.
            raise RuntimeError("bm3dcuda: neither bm3d.VAggregate nor bm3dcuda.BM3Dv2 exists")
        return out
    if plugin in ("vszipcu", "vszipcu_fused"):
        fused = plugin == "vszipcu_fused"
        return bench_bm3d._vszipcu(core, clip, case, fused=fused, device_id=device_id)
    if plugin in bench_bm3d.VULKAN:  # the core's one Vulkan device: no device_id
        return bench_bm3d.vulkan(core, plugin, clip, case)
    raise ValueError(f"bm3d: unknown plugin {plugin!r}")


def _nlm_case(channels: str) -> Build:
    """Build hook of an NLM case on the channels `channels` (KNLMeansCL's names)."""

    def build(core, plugin: str, noisy, device: str, device_id: int | None):
        return _nlm(core, plugin, noisy, channels, device, device_id)

    return build


def _bm3d_case(fmt: str, radius: int, *, chroma: bool) -> Build:
    """Build hook of a BM3D case: one stage, temporal `radius`, CBM3D when `chroma`."""
    settings = bench_bm3d.Case(fmt, radius, chroma=chroma)

    def build(core, plugin: str, noisy, device: str, device_id: int | None):
        return _bm3d(core, plugin, noisy, settings, device, device_id)

    return build


def _chain(core, plugin: str, noisy, device: str, device_id: int | None):
    """V-BM3D (radius 1) on luma, then NLM on both chroma planes jointly: two filters a script.

    Luma goes through a GRAY clip and back (native plane shuffles, the same for every
    plugin), so that each BM3D filters one plane whatever it does with sigma 0 planes. The
    rivals' chain is vszipcu's (its BM3Dv2, with ``fast_fused`` for ``vszipcu_fused``, then
    its NLMeans): the one rival with both filters.
    """
    import vapoursynth as vs

    luma = core.std.ShufflePlanes(noisy, 0, vs.GRAY)
    luma = _bm3d(core, plugin, luma, bench_bm3d.Case("GRAYS", 1, chroma=False), device, device_id)
    merged = core.std.ShufflePlanes([luma, noisy], [0, 1, 2], vs.YUV)
    nlm_plugin = "vszipcu" if plugin.startswith("vszipcu") else plugin
    return _nlm(core, nlm_plugin, merged, "UV", device, device_id)


def _with_callback(build: Build) -> Build:
    """`build` behind a per-frame Python callback, as scripts that tag or select frames have.

    ``std.ModifyFrame``'s selector takes ``n`` and ``f`` by name, which is how VapourSynth R81
    passes them (R79 passes them in that order). It takes the GIL once a frame in the
    worker, which a Python filter (ours) then has to share.
    """

    def build_behind(core, plugin: str, noisy, device: str, device_id: int | None):
        def tag(n, f):
            out = f.copy()
            out.props["FleetFrame"] = n
            return out

        return build(core, plugin, core.std.ModifyFrame(noisy, noisy, tag), device, device_id)

    return build_behind


_NLM_RIVALS = ("vszipcu", "knlm", "nlm_cuda")
_BM3D_RIVALS = ("bm3dcuda", "vszipcu", "vszipcu_fused", *bench_bm3d.VULKAN)
_BM3D_R0_RIVALS = tuple(r for r in _BM3D_RIVALS if r != "vszipcu_fused")
_NLM_NOISE = bench_nlm.NOISE_MODEL
_BM3D_NOISE = bench_bm3d.NOISE

CASES: dict[str, Case] = {
    "NLM Y d1 a2 s4": Case("YUV420P8", _NLM_NOISE, _NLM_RIVALS, _nlm_case("Y")),
    "NLM YUV444 joint d1 a2 s4": Case("YUV444P8", _NLM_NOISE, _NLM_RIVALS, _nlm_case("YUV")),
    # vszipcu_fused (fast_fused) applies to radius > 0 only.
    "BM3D r0 luma": Case("GRAYS", _BM3D_NOISE, _BM3D_R0_RIVALS, _bm3d_case("GRAYS", 0, chroma=False)),
    "BM3D r0 YUV444": Case("YUV444PS", _BM3D_NOISE, _BM3D_R0_RIVALS, _bm3d_case("YUV444PS", 0, chroma=True)),
    "V-BM3D r1 YUV444": Case("YUV444PS", _BM3D_NOISE, _BM3D_RIVALS, _bm3d_case("YUV444PS", 1, chroma=True)),
    "V-BM3D r2 YUV444": Case("YUV444PS", _BM3D_NOISE, _BM3D_RIVALS, _bm3d_case("YUV444PS", 2, chroma=True)),
    "chain V-BM3D r1 luma + NLM UV": Case("YUV420PS", _BM3D_NOISE, ("vszipcu", "vszipcu_fused"), _chain),
    # vszipcu: the fastest NLM rival in every recorded run (docs/BENCHMARKS.md).
    "NLM Y d1 a2 s4 + Python ModifyFrame": Case(
        "YUV420P8", _NLM_NOISE, ("vszipcu",), _with_callback(_nlm_case("Y"))
    ),
}  # fmt: skip


def select(patterns: str | None) -> list[str]:
    """Case names containing any of the comma-separated `patterns` (any case); all without."""
    wanted = [p.strip().lower() for p in (patterns or "").split(",") if p.strip()]
    if not wanted:
        return list(CASES)
    return [name for name in CASES if any(p in name.lower() for p in wanted)]


def render(
    case: str,
    plugin: str,
    width: int,
    height: int,
    device: str,
    threads: int,
    device_id: int | None = None,
):
    """The clip one worker outputs: the case's noisy source through `plugin`'s filters.

    `threads` > 0 sets VapourSynth's thread count; 0 keeps its default (one a CPU core), which
    is what a worker under Av1an gets. `device_id` is a rival's GPU (ours places itself).
    """
    import vapoursynth as vs

    core = vs.core
    if threads > 0:
        core.num_threads = threads
    chosen = CASES[case]
    noisy, _ = _bench.make_source(core, chosen.fmt, width, height, chosen.noise)
    if plugin == BUS:
        return bench_bm3d.bus(core, noisy)
    return chosen.build(core, plugin, noisy, device, device_id)
