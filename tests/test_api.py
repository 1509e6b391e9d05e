"""avdenoise_vs.denoise / nlmeans / bm3d: the typed Python API beside the namespace."""

from __future__ import annotations

import doctest
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import vapoursynth as vs

import avdenoise_vs
from avdenoise_vs._api import API_FUNCTIONS
from avdenoise_vs._params import BM3D_PARAMS, DENOISE_PARAMS, NLMEANS_PARAMS

from .vsclips import assert_same_frames, clip_from_planes, random_planes

ROOT = Path(__file__).resolve().parents[1]
TABLES = {"denoise": DENOISE_PARAMS, "nlmeans": NLMEANS_PARAMS, "bm3d": BM3D_PARAMS}


def make_clip(core, format_id=vs.YUV420P8, length=3):
    fmt = core.get_video_format(format_id)
    return clip_from_planes(core, fmt, [random_planes(fmt, 24, 16, n) for n in range(length)])


def test_exported_from_the_package():
    assert {"denoise", "nlmeans", "bm3d"} <= set(avdenoise_vs.__all__)
    assert [f.name for f in API_FUNCTIONS] == ["denoise", "nlmeans", "bm3d"]


@pytest.mark.parametrize("name", TABLES)
def test_signature_comes_from_the_table(name):
    params = inspect.signature(getattr(avdenoise_vs, name)).parameters
    assert list(params) == [p.name for p in TABLES[name]]
    for param in TABLES[name]:
        default = params[param.name].default
        if param.required:
            assert default is inspect.Parameter.empty
        elif isinstance(param.default, list):
            assert default == tuple(param.default)
        elif not isinstance(param.default, dict):
            assert default == param.default, param.name


def test_defaults_in_signatures_and_docstrings():
    sig = inspect.signature(avdenoise_vs.denoise).parameters
    assert sig["strength"].default is None and sig["radius"].default is None
    assert inspect.signature(avdenoise_vs.nlmeans).parameters["h"].default == 1.2
    assert inspect.signature(avdenoise_vs.nlmeans).parameters["d"].default == 1
    doc = avdenoise_vs.denoise.__doc__
    assert "strength : float, optional\n" in doc and "Default: nlm 4.5, bm3d 7.0." in doc
    assert "algorithm : {'nlm', 'bm3d'}, default 'nlm'\n" in doc
    assert "radius : int, optional\n" in doc and "Default: nlm 1, bm3d 0." in doc
    assert "Only with algorithm='bm3d'." in doc
    assert "h : float, default 1.2\n" in avdenoise_vs.nlmeans.__doc__
    assert "sigma : float or sequence of float, default [3.0]\n" in avdenoise_vs.bm3d.__doc__
    for function in (avdenoise_vs.denoise, avdenoise_vs.nlmeans, avdenoise_vs.bm3d):
        for section in ("Parameters", "Returns", "Raises", "References", "Examples"):
            assert f"\n{section}\n{'-' * len(section)}\n" in function.__doc__
        assert max(map(len, function.__doc__.splitlines())) <= 88


@pytest.mark.parametrize("name", TABLES)
def test_docstring_examples_run(core, name):
    function = getattr(avdenoise_vs, name)
    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder().find(function, name, globs={}):
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert (results.attempted, results.failed) == (4, 0)


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("denoise", dict(strength=6.0, radius=0, device="cpu")),
        ("denoise", dict(algorithm="bm3d", strength=4.0, device="cpu")),  # no NLM defaults sent
        ("nlmeans", dict(h=5.0, channels="uv")),
        ("bm3d", dict(sigma=[4.0, 2.0], device="cpu")),
    ],
)
def test_calls_the_namespace(core, name, kwargs):
    clip = make_clip(core, vs.YUV444P8)
    vs_name = next(f.vs_name for f in API_FUNCTIONS if f.name == name)
    assert_same_frames(
        getattr(avdenoise_vs, name)(clip, **kwargs),
        getattr(core.avdenoise, vs_name)(clip, **kwargs),
    )


def test_positional_arguments_follow_the_registered_order(core):
    clip = make_clip(core, vs.GRAY8)
    assert_same_frames(
        avdenoise_vs.nlmeans(clip, 0, 1, 1, 9.0), core.avdenoise.NLMeans(clip, 0, 1, 1, 9.0)
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(radius=1.5), r"radius must be an integer from 0 to 8, got 1\.5"),
        (dict(radius=True), r"radius must be an integer from 0 to 8, got True"),
        (dict(strength="strong"), r"strength must be a number from 1e-6 to 1e6, got 'strong'"),
        (dict(channels=3), r"channels must be one of 'luma', .*got 3"),
        (dict(ref="clip"), r"ref must be a clip, got 'clip'"),
        (
            dict(accelerators=["cpu", 1]),
            r"accelerators must be a non-empty list, .*got \['cpu', 1\]",
        ),
        (dict(strenght=2.0), r"unknown argument 'strenght' \(did you mean 'strength'\?\)"),
    ],
)
def test_wrong_types_are_named(core, kwargs, message):
    with pytest.raises(TypeError, match=r"^avdenoise\.Denoise: " + message):
        avdenoise_vs.denoise(make_clip(core), **kwargs)


def test_values_are_checked_by_the_plugin(core):
    with pytest.raises(
        vs.Error, match=r"^avdenoise\.NLMeans: d must be an integer from 0 to 8, got 9"
    ):
        avdenoise_vs.nlmeans(make_clip(core), d=9)
    with pytest.raises(TypeError, match=r"^avdenoise\.BM3D: missing a required argument: 'clip'"):
        avdenoise_vs.bm3d()
    with pytest.raises(TypeError, match=r"^avdenoise\.BM3D: sigma must be .*got \[3\.0, 'x'\]"):
        avdenoise_vs.bm3d(make_clip(core), sigma=[3.0, "x"])


def test_checked_in_stub_matches_the_table():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_stubs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    stub = (ROOT / "avdenoise_vs" / "_api.pyi").read_text()
    assert "    strength: float | None = None,\n" in stub and "    h: float = 1.2,\n" in stub


def test_namespace_points_to_the_api(core):
    assert "help(avdenoise_vs.denoise)" in core.avdenoise.name
    assert "strength" in inspect.signature(core.avdenoise.Denoise).parameters


def test_importing_the_package_imports_no_numpy():
    probe = "import sys, avdenoise_vs; avdenoise_vs.denoise; print('numpy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
