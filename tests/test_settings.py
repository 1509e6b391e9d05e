"""The pass settings: built from the parameter table, frozen, one class per algorithm."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from avdenoise_vs._params import ALGORITHMS, BM3D_PARAMS, DENOISE_PARAMS
from avdenoise_vs._params.options import ColorFamily, Distance, FrameLayout, SampleType, WeightMode
from avdenoise_vs._params.settings import (
    Algorithm,
    Bm3dSettings,
    NlmSettings,
    PassCommon,
    PassSettings,
    Stages,
)
from avdenoise_vs._params.spec import parse_arguments
from avdenoise_vs._plugin.passes import plan_bm3d_passes, plan_passes

__all__: list[str] = []

YUV420 = FrameLayout(64, 48, ColorFamily.YUV, 1, 1, 8, SampleType.INTEGER)
#: Stands in for a clip: the parameter table only passes clips through.
CLIP = object()
#: The fields each pass shares (PassCommon) and those of one algorithm alone.
COMMON = {"planes", "distance", "strength", "radius", "has_ref"}
NLM_ONLY = {"search_radius", "patch_radius", "wmode", "wref"}
BM3D_ONLY = {"plane_strengths", "stages", "lambda_ht", "mismatch_scale"} | {
    "block_step",
    "bm_range",
    "ps_num",
    "ps_range",
}


def _args(**kwargs) -> dict[str, list]:
    """Keyword arguments as the bridge passes them: each value in a list."""
    return {"clip": [CLIP]} | {
        name: value if isinstance(value, list) else [value] for name, value in kwargs.items()
    }


def denoise_passes(layout: FrameLayout = YUV420, **kwargs) -> tuple[PassSettings, ...]:
    """The passes of ``Denoise(**kwargs)`` on a clip of `layout`."""
    values = parse_arguments("Denoise", DENOISE_PARAMS, _args(**kwargs), algorithm_key="algorithm")
    written = values["channels"] if "channels" in kwargs else None
    return plan_passes("Denoise", values, layout, written)


def bm3d_passes(**kwargs) -> tuple[Bm3dSettings, ...]:
    """The passes of ``BM3D(**kwargs)`` on a YUV 4:2:0 clip."""
    values = parse_arguments("BM3D", BM3D_PARAMS, _args(**kwargs), algorithm="bm3d")
    return plan_bm3d_passes("BM3D", values, YUV420)


def _default(name: str, algorithm: str):
    return next(p for p in DENOISE_PARAMS if p.name == name).default_for(algorithm)


def test_nlm_passes_from_the_table_hold_its_defaults() -> None:
    luma, chroma = denoise_passes()
    assert type(luma) is NlmSettings and type(chroma) is NlmSettings
    assert (luma.planes, luma.distance) == ((0,), Distance.LUMA)
    assert (chroma.planes, chroma.distance) == ((1, 2), Distance.CHROMA)
    for name in ("radius", "search_radius", "patch_radius", "wref", "strength"):
        assert getattr(luma, name) == _default(name, "nlm"), name
    assert luma.wmode is WeightMode(_default("wmode", "nlm"))
    assert luma.algorithm is Algorithm.NLM and not luma.has_ref


def test_bm3d_passes_from_the_table_hold_its_defaults() -> None:
    (joint,) = denoise_passes(
        FrameLayout(32, 32, ColorFamily.RGB, 0, 0, 8, SampleType.INTEGER), algorithm="bm3d"
    )
    assert type(joint) is Bm3dSettings and joint.algorithm is Algorithm.BM3D
    assert (joint.planes, joint.distance) == ((0, 1, 2), Distance.RGB)
    names = ("radius", "lambda_ht", "mismatch_scale", "block_step", "bm_range", "ps_num")
    for name in (*names, "ps_range"):
        assert getattr(joint, name) == _default(name, "bm3d"), name
    assert joint.stages is Stages.BOTH and joint.stages.parameter == _default("stages", "bm3d")
    assert joint.plane_strengths == (_default("strength", "bm3d"),) * 3


@pytest.mark.parametrize(
    ("kwargs", "stages"),
    [
        (dict(stages=1), Stages.HARD_THRESHOLD),
        (dict(stages=2), Stages.BOTH),
        (dict(stages=2, ref=CLIP), Stages.WIENER),
        (dict(ref=CLIP), Stages.WIENER),
    ],
    ids=["1", "2", "2-ref", "ref"],
)
def test_denoise_stages_and_ref_give_the_stages(kwargs, stages: Stages) -> None:
    passes = denoise_passes(algorithm="bm3d", **kwargs)
    assert all(o.stages is stages for o in passes)
    assert all(o.has_ref == ("ref" in kwargs) for o in passes)


def test_bm3d_function_runs_one_stage_or_the_wiener_stage_with_ref() -> None:
    assert all(o.stages is Stages.HARD_THRESHOLD for o in bm3d_passes(sigma=3.0))
    assert all(o.stages is Stages.WIENER and o.has_ref for o in bm3d_passes(ref=CLIP))


def test_per_plane_sigma_reaches_plane_strengths() -> None:
    passes = bm3d_passes(sigma=[4.0, 0.0, 2.0])
    assert [(o.planes, o.plane_strengths, o.strength) for o in passes] == [
        ((0,), (4.0,), 4.0),
        ((2,), (2.0,), 2.0),
    ]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_settings_are_frozen_and_slotted(algorithm: str) -> None:
    options = denoise_passes(algorithm=algorithm)[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.radius = 3
    with pytest.raises((AttributeError, TypeError)):
        options.unknown = 1  # slots: no instance dictionary to take it
    assert not hasattr(options, "__dict__")
    assert pickle.loads(pickle.dumps(options)) == options
    assert hash(options) == hash(dataclasses.replace(options))


def test_each_algorithm_has_its_own_fields_only() -> None:
    nlm_fields = {f.name for f in dataclasses.fields(NlmSettings)}
    bm3d_fields = {f.name for f in dataclasses.fields(Bm3dSettings)}
    assert nlm_fields == COMMON | NLM_ONLY
    # A BM3D pass derives strength and has_ref (from plane_strengths and stages).
    assert bm3d_fields == (COMMON - {"strength", "has_ref"}) | BM3D_ONLY
    nlm, bm3d = denoise_passes()[0], denoise_passes(algorithm="bm3d")[0]
    assert not any(hasattr(nlm, name) for name in BM3D_ONLY)
    assert not any(hasattr(bm3d, name) for name in NLM_ONLY)


@pytest.mark.parametrize("cls", [NlmSettings, Bm3dSettings])
def test_no_field_is_optional(cls) -> None:
    assert all("None" not in str(f.type) for f in dataclasses.fields(cls))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_both_have_the_common_protocol(algorithm: str) -> None:
    options = denoise_passes(algorithm=algorithm)[0]
    assert isinstance(options, PassCommon) and isinstance(options, PassSettings)
    assert options.algorithm is Algorithm(algorithm)


def test_algorithm_round_trips_and_is_the_table_choice() -> None:
    assert ALGORITHMS == tuple(a.value for a in Algorithm)
    assert all(Algorithm(a.value) is a for a in Algorithm)
    assert {NlmSettings.algorithm, Bm3dSettings.algorithm} == set(Algorithm)


@pytest.mark.parametrize("stages", [Stages.HARD_THRESHOLD, Stages.WIENER, Stages.BOTH])
def test_stages_round_trip_through_the_parameter(stages: Stages) -> None:
    assert Stages.from_parameter(stages.parameter, stages is Stages.WIENER) is stages
    assert Stages(stages.value) is stages


def test_stages_flags_say_which_stages_run() -> None:
    assert Stages.HARD_THRESHOLD in Stages.BOTH and Stages.WIENER in Stages.BOTH
    assert Stages.WIENER not in Stages.HARD_THRESHOLD
    with pytest.raises(ValueError, match="stages=1"):
        Stages.from_parameter(1, has_ref=True)


def test_weight_mode_round_trips_through_its_table_integer() -> None:
    assert all(WeightMode(int(mode)) is mode for mode in WeightMode)


@pytest.mark.parametrize(
    ("stages", "window_radius"),
    [(Stages.HARD_THRESHOLD, 4), (Stages.WIENER, 4), (Stages.BOTH, 8)],
)
def test_bm3d_window_radius_follows_the_stages(stages: Stages, window_radius: int) -> None:
    options = dataclasses.replace(bm3d_passes(radius=2)[0], stages=stages)
    assert options.window_radius == window_radius
    assert options.has_ref == (stages is Stages.WIENER)


def test_written_planes_leave_out_planes_of_strength_zero() -> None:
    (joint,) = denoise_passes(
        FrameLayout(32, 32, ColorFamily.YUV, 0, 0, 8, SampleType.INTEGER),
        algorithm="bm3d",
        channels="yuv",
    )
    assert joint.written_planes == (0, 1, 2)
    quiet = dataclasses.replace(joint, plane_strengths=(0.0, 5.0, 5.0))
    assert quiet.written_planes == (1, 2) and quiet.strength == 0.0


@pytest.mark.parametrize(
    ("algorithm", "changes", "match"),
    [
        ("nlm", dict(wmode=0), "NlmSettings: wmode must be a WeightMode, got 0"),
        ("nlm", dict(planes=(0, 1, 2)), "planes must be 2 planes for Distance.CHROMA"),
        ("nlm", dict(planes=(2, 1)), "planes must be ascending"),
        ("nlm", dict(strength=float("nan")), "strength must be > 0"),
        ("nlm", dict(search_radius=0), "search_radius must be >= 1"),
        ("bm3d", dict(plane_strengths=(1.0,)), "plane_strengths must be one per plane"),
        ("bm3d", dict(plane_strengths=(0.0, 0.0)), "plane_strengths must be >= 0, one > 0"),
        (
            "bm3d",
            dict(planes=(0, 1, 2), distance=Distance.RGB, plane_strengths=(1.0, 2.0, 2.0)),
            "plane_strengths must be equal for Distance.RGB",
        ),
        ("bm3d", dict(stages=Stages(0)), "stages must be HARD_THRESHOLD, WIENER or BOTH"),
        ("bm3d", dict(distance="chroma"), "distance must be a Distance"),
        ("bm3d", dict(bm_range=0), "Bm3dSettings: bm_range must be >= 1, got 0"),
    ],
)
def test_post_init_catches_a_broken_invariant(algorithm: str, changes: dict, match: str) -> None:
    chroma = denoise_passes(algorithm=algorithm)[1]
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(chroma, **changes)
