"""The drop-ins' translation comes from their tables: every parameter names the Denoise parameter
it sets and how (``Param.maps_to``), and ``_translate.translate`` applies that alone; messages
name the script's own argument, the device number staying an int."""

from __future__ import annotations

import pytest

from avdenoise_vs._params import BM3D_PARAMS, DENOISE_PARAMS, NLMEANS_PARAMS
from avdenoise_vs._params.device_choice import DeviceChoice
from avdenoise_vs._params.spec import Choice, MapsTo, Param, Range, parse_arguments
from avdenoise_vs._params.translate import translate

from ..fake_cuda_backend import random_clip

DENOISE = {p.name: p for p in DENOISE_PARAMS}
DROPINS = {"NLMeans": (NLMEANS_PARAMS, "nlm"), "BM3D": (BM3D_PARAMS, "bm3d")}
#: Stands for a clip: parse_arguments does not look into clips.
CLIP = object()


def _call(function: str, **kwargs):
    params, algorithm = DROPINS[function]
    args = {"clip": [CLIP]} | {
        name: value if isinstance(value, list) else [value] for name, value in kwargs.items()
    }
    values = parse_arguments(function, params, args, algorithm=algorithm)
    return translate(function, params, values, args, algorithm)


@pytest.mark.parametrize("function", DROPINS)
def test_every_dropin_parameter_maps_to_a_denoise_parameter(function):
    for param in DROPINS[function][0]:
        if param.ignored:
            assert param.maps_to is None, param.name
            continue
        assert param.maps_to is not None, f"{function} {param.name} maps to nothing"
        target = DENOISE[param.maps_to.target]
        # The docs' alias is the translation's own words.
        assert param.alias == param.maps_to.alias(), param.name
        if param.maps_to.convert is None and param.maps_to.values is None:
            # A rename: Denoise's kind, or one value of it per plane.
            assert param.kind in (target.kind, target.kind + "[]"), param.name


@pytest.mark.parametrize("function", DROPINS)
def test_value_maps_cover_the_dropins_values_and_give_denoises(function):
    for param in DROPINS[function][0]:
        mapping = param.maps_to
        if mapping is None or mapping.values is None:
            continue
        drop_in_values = param.allowed.values if param.kind != "bool" else (False, True)
        assert set(mapping.values) == set(drop_in_values), param.name
        for value in drop_in_values:
            assert DENOISE[mapping.target].allowed.check(mapping.apply(param.name, value))


def test_nlmeans_arguments_become_denoises_settings():
    ref = object()
    call = _call("NLMeans", d=2, a=3, s=1, h=2.5, channels="Yuv", wmode=1, wref=0.5, rclip=ref)
    want = dict(radius=2, search_radius=3, patch_radius=1, strength=2.5, channels="yuv")
    assert {name: call.values[name] for name in want} == want
    assert (call.values["wmode"], call.values["wref"], call.values["ref"]) == (1, 0.5, ref)
    assert call.values["algorithm"] == "nlm"
    # Messages repeat what the script wrote, and NLMeans' names of Denoise's values.
    assert (call.name("ref"), call.name("radius"), call.as_written("channels")) == (
        "rclip",
        "d",
        "Yuv",
    )
    assert call.spelling("channels") == {"luma": "Y", "chroma": "UV", "yuv": "YUV", "rgb": "RGB"}
    # Settings NLMeans has no argument for hold Denoise's NLM defaults.
    assert call.values["accelerators"] == DENOISE["accelerators"].default
    assert call.values["device"] == DeviceChoice("auto", None, "device='auto'")


def test_nlmeans_auto_channels_leave_the_choice_to_the_clip():
    """channels='auto' is luma with no channels written: plan_passes then gives RGB clips
    'rgb', as for a Denoise call without channels."""
    for call in (_call("NLMeans"), _call("NLMeans", channels="auto")):
        assert call.values["channels"] == "luma"
        assert call.as_written("channels") is None


@pytest.mark.parametrize("function", DROPINS)
def test_device_id_stays_a_number(function):
    device = _call(function, device_id=2).values["device"]
    assert device == DeviceChoice("cuda", 2, "device_id=2")
    assert type(device.index) is int


def test_bm3d_device_is_read_once():
    assert _call("BM3D", device="CUDA:1").values["device"] == DeviceChoice(
        "cuda", 1, "device='cuda:1'"
    )
    assert _call("BM3D").values["device"] == DeviceChoice("auto", None, "device='auto'")


def test_bm3d_arguments_become_denoises_settings():
    call = _call("BM3D", sigma=[2.0, 1.0], chroma=True, radius=1, lambda_ht=3.0)
    assert call.values["strength"] == [2.0, 1.0]  # one value per plane
    assert (call.values["channels"], call.values["radius"]) == ("yuv", 1)
    assert call.values["lambda_ht"] == 3.0 and call.values["algorithm"] == "bm3d"
    assert call.name("strength") == "sigma"


def test_two_arguments_for_one_setting_are_an_error_naming_both():
    """Any two arguments of a table that set the same setting, not only BM3D's device_id and
    device."""
    params = (
        Param("clip", "clip", "The clip.", maps_to=MapsTo("clip")),
        Param("r", "int", "Radius.", allowed=Range(0, 8), maps_to=MapsTo("radius")),
        Param("t", "int", "Radius.", allowed=Range(0, 8), maps_to=MapsTo("radius")),
    )
    args = {"clip": [CLIP], "r": [1], "t": [2]}
    values = parse_arguments("F", params, args)
    with pytest.raises(ValueError, match=r"^avdenoise\.F: r and t cannot both be given, got r=1 "):
        translate("F", params, values, args, "nlm")
    args.pop("t")
    assert translate("F", params, values, args, "nlm").values["radius"] == 1


def test_value_maps_and_conversions_apply_as_declared():
    mapping = MapsTo("channels", values={"A": None, "B": "luma"}, unset="rgb")
    assert (mapping.apply("c", "A"), mapping.apply("c", "B")) == ("rgb", "luma")
    assert mapping.leaves_to_clip("A") and not mapping.leaves_to_clip("B")
    converted = MapsTo("device", convert=DeviceChoice.numbered, words="device='cuda:N'")
    assert converted.apply("gpu", 3) == DeviceChoice("cuda", 3, "gpu=3")
    assert converted.alias() == "Denoise device='cuda:N'"
    assert Choice(("A",)).check("a")


@pytest.mark.parametrize("function", ["NLMeans", "BM3D"])
def test_a_kept_gpu_backend_names_device_id(core, fake_cuda, vs_log, function):
    """A failed warm-up on the device the script chose by number says device_id=N."""
    fake_cuda.failures = 1
    getattr(core.avdenoise, function)(random_clip(core), device_id=0).get_frame(0)
    (warning,) = [m for m in vs_log if m.startswith("avdenoise.")]
    assert warning.endswith("device_id=0 stays on it; its first frame compiles the kernels again")
    assert fake_cuda.built[0].device_id == 0


@pytest.mark.parametrize("function", ["NLMeans", "BM3D"])
def test_a_deferred_failure_names_device_id(core, fake_cuda, function):
    """The context fails on the warm-up's thread: the first frame's error names device_id."""
    vs = pytest.importorskip("vapoursynth")
    fake_cuda.context_fails = "no context"
    clip = getattr(core.avdenoise, function)(random_clip(core), device_id=1)
    with pytest.raises(vs.Error, match=rf"avdenoise\.{function}: device_id=1 cannot run here "):
        clip.get_frame(0)
