"""V-BM3D's predictive-search settings given where radius=0 runs plain BM3D: the script runs,
and VapourSynth's log says that they change nothing, as for the compatibility arguments."""

from __future__ import annotations

import vapoursynth as vs

from avdenoise_vs._params import BM3D_PARAMS, DENOISE_PARAMS, NLMEANS_PARAMS


def test_predictive_search_settings_warn_at_radius_0(core, vs_log):
    clip = core.std.BlankClip(width=32, height=32, format=vs.GRAYS, length=1)
    core.avdenoise.BM3D(clip, ps_num=[3], ps_range=[5], device="cpu")
    core.avdenoise.BM3D(clip, radius=1, ps_num=[3], ps_range=[5], device="cpu")
    core.avdenoise.Denoise(clip, algorithm="bm3d", ps_num=3, device="cpu")
    core.avdenoise.Denoise(clip, algorithm="bm3d", radius=0, ps_range=6, device="cpu")
    core.avdenoise.Denoise(clip, algorithm="bm3d", radius=2, ps_num=3, device="cpu")
    core.avdenoise.Denoise(clip, algorithm="bm3d", radius=0, device="cpu")
    said = [m for m in vs_log if "changes nothing" in m]
    assert [m.split(" with ")[0] for m in said] == [
        "avdenoise.BM3D: ps_num=[3] changes nothing",
        "avdenoise.BM3D: ps_range=[5] changes nothing",
        "avdenoise.Denoise: ps_num=3 changes nothing",
        "avdenoise.Denoise: ps_range=6 changes nothing",
    ]
    assert all("radius=0" in m and "radius > 0" in m for m in said), said


def test_the_tables_mark_the_predictive_search_settings():
    tables = {"Denoise": DENOISE_PARAMS, "NLMeans": NLMEANS_PARAMS, "BM3D": BM3D_PARAMS}
    temporal = {(f, p.name) for f, table in tables.items() for p in table if p.temporal}
    assert temporal == {(f, p) for f in ("Denoise", "BM3D") for p in ("ps_num", "ps_range")}
