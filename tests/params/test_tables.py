"""The parameter table is the single source of truth: signature and docs come from it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from avdenoise_vs._params import BM3D_PARAMS, DENOISE_PARAMS, NLMEANS_PARAMS
from avdenoise_vs._params.spec import Param, Range, markdown_table, parse_arguments
from avdenoise_vs._plugin.bridge import plugin_functions
from avdenoise_vs.sample import noisy_sample, psnr

from ..vsclips import frame_planes

PARAMETERS = Path(__file__).resolve().parents[2] / "docs" / "PARAMETERS.md"


def test_registered_signature_lists_every_parameter(core):
    registered = dict(plugin_functions())["Denoise"]
    assert registered.startswith("clip:vnode;")
    for param in DENOISE_PARAMS:
        assert f"{param.name}:" in registered
    # Clips of either residency where the bridge takes GPU clips (_native/gpu_frames.h).
    gpu = core.avdenoise.Denoise.return_signature == "clip:vnode:all;"
    registered = dict(plugin_functions(gpu))["Denoise"]
    assert core.avdenoise.Denoise.signature.replace(" ", "") == registered


@pytest.mark.parametrize("params", [DENOISE_PARAMS, NLMEANS_PARAMS, BM3D_PARAMS])
def test_parameters_page_table_is_generated_from_the_code(params):
    assert markdown_table(params) in PARAMETERS.read_text(), (
        "docs/PARAMETERS.md is out of date: run python scripts/gen_readme.py"
    )


def test_lists_and_bools():
    """Per-plane lists check every item and their length; bools take 0 or 1."""
    params = (
        Param("x", "float[]", "A list.", default=[1.0], allowed=Range(0.0), max_items=3),
        Param("flag", "bool", "A flag.", default=False),
    )
    assert parse_arguments("F", params, {}) == {"x": [1.0], "flag": False}
    assert parse_arguments("F", params, {"x": [2.0, 0.0], "flag": [1]}) == {
        "x": [2.0, 0.0],
        "flag": True,
    }
    for args, message in [
        ({"x": [1.0, -1.0]}, "x must be a list of 1 to 3 items, each item a finite number >= 0"),
        ({"x": [1.0, math.inf]}, r"x must be a list .*, got \[1.0, inf\]"),
        ({"x": [1.0] * 4}, "x must be a list of 1 to 3 items"),
        ({"flag": [2]}, "flag must be True or False, got 2"),
    ]:
        with pytest.raises(ValueError, match=r"avdenoise\.F: " + message):
            parse_arguments("F", params, args)


@pytest.mark.parametrize(
    "allowed, kind, words",
    [
        (Range(0.0), "float", "a finite number >= 0"),
        (Range(0.0, open_low=True), "float", "a finite number > 0"),
        (Range(0.0, 1e6, open_low=True), "float", "a number > 0 and at most 1e6"),
        (Range(1e-6, 1e6), "float", "a number from 1e-6 to 1e6"),
        (Range(0), "int", "an integer >= 0"),
        (Range(1, 16), "int", "an integer from 1 to 16"),
    ],
)
def test_ranges_take_finite_values_only(allowed, kind, words):
    """NaN and infinities are out of every range, an unbounded one too, and the words say so."""
    assert allowed.describe(kind) == words
    assert allowed.check(allowed.low + 1)
    for value in (math.nan, math.inf, -math.inf):
        assert not allowed.check(value)


def test_every_parameter_is_documented():
    for param in DENOISE_PARAMS:
        assert len(param.doc) > 20, param.name
        assert param.required or param.default is not None or param.kind in ("clip", "float")


@pytest.mark.parametrize("algorithm", ["nlm", "bm3d"])
def test_defaults_visibly_denoise_typical_noise(core, algorithm):
    """At its default strength each algorithm raises luma PSNR by 4 dB or more on sigma-8
    noise (a 96x96 crop of the seeded sample; measured +6.5 dB NLM, +7.5 dB BM3D), and
    changes every plane.

    The defaults come from scripts/bench/strength_table.py (README, 'Strength').
    """
    clean, noisy = noisy_sample(core, length=3, sigma=8.0)
    clean, noisy = (core.std.Crop(c, right=480 - 96, bottom=320 - 96) for c in (clean, noisy))
    want, before = (frame_planes(c.get_frame(1)) for c in (clean, noisy))
    out = core.avdenoise.Denoise(noisy, algorithm=algorithm, device="cpu")
    got = frame_planes(out.get_frame(1))
    for plane in range(3):
        assert not np.array_equal(got[plane], before[plane])
    gain = psnr(got[0], want[0], 255) - psnr(before[0], want[0], 255)
    assert gain >= 4.0, gain


def test_dropins_keep_their_rivals_defaults(core):
    """NLMeans keeps KNLMeansCL's h=1.2 and BM3D BM3DCUDA's sigma=3.0, so that a drop-in
    call gives the rival's output; which is why Denoise does not: sigma-8 noise stays almost
    untouched."""
    assert next(p for p in NLMEANS_PARAMS if p.name == "h").default == 1.2
    assert next(p for p in BM3D_PARAMS if p.name == "sigma").default == [3.0]
    clean, noisy = noisy_sample(core, length=3, sigma=8.0)
    clean, noisy = (core.std.Crop(c, right=480 - 96, bottom=320 - 96) for c in (clean, noisy))
    want, before = (np.asarray(c.get_frame(1)[0]) for c in (clean, noisy))
    knlm = np.asarray(core.avdenoise.NLMeans(noisy).get_frame(1)[0])
    assert np.mean(knlm == before) > 0.99
    assert psnr(knlm, want, 255) - psnr(before, want, 255) < 0.1
    bm3d = np.asarray(core.avdenoise.BM3D(noisy, device="cpu").get_frame(1)[0])
    assert psnr(bm3d, want, 255) - psnr(before, want, 255) < 2.0
