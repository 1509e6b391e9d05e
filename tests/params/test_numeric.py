"""Every numeric parameter of every function is checked when the filter is created.

The cases come from the parameter tables, so a parameter added later is tested too: NaN, both
infinities and a value just out of range, each of which must fail at creation (no frame is
requested) with ``avdenoise.<Function>: <param> must be <allowed>, got <value>``.
"""

from __future__ import annotations

import math
import re

import pytest
import vapoursynth as vs

from avdenoise_vs._params import BM3D_PARAMS, DENOISE_PARAMS, NLMEANS_PARAMS
from avdenoise_vs._params.spec import LIST_KINDS, Param, Range

NAN, INF = math.nan, math.inf
FUNCTIONS = {"Denoise": DENOISE_PARAMS, "NLMeans": NLMEANS_PARAMS, "BM3D": BM3D_PARAMS}


def _numeric(kind: str) -> list[tuple[str, Param]]:
    """(function, param) of every parameter of `kind` ("int" or "float", lists included)."""
    return [
        (function, param)
        for function, params in FUNCTIONS.items()
        for param in params
        if param.kind.removesuffix("[]") == kind
    ]


def _out_of_range(param: Param) -> list[float]:
    """Values just outside the parameter's range."""
    allowed = param.allowed
    assert isinstance(allowed, Range), param.name
    step = 1 if param.kind.startswith("int") else max(abs(allowed.low), 1e-3) / 2
    values = [allowed.low if allowed.open_low else allowed.low - step]
    if allowed.high != INF:
        values.append(allowed.high + (1 if param.kind.startswith("int") else allowed.high))
    return values


def _call(core, function: str, param: Param, value):
    """Create `function` with `param` = `value` (as a one-item list for list parameters)."""
    clip = core.std.BlankClip(width=32, height=24, format=vs.YUV444P8, length=3)
    kwargs = {param.name: [value] if param.kind in LIST_KINDS else value}
    if param.algorithms is not None:  # Denoise's settings of one algorithm
        kwargs["algorithm"] = param.algorithms[0]
    if function != "NLMeans":  # KNLMeansCL's signature has device_id only
        kwargs["device"] = "cpu"
    return getattr(core.avdenoise, function)(clip, **kwargs)


def _message(function: str, param: Param, value) -> str:
    shown = [value] if param.kind in LIST_KINDS else value
    return re.escape(
        f"avdenoise.{function}: {param.name} must be {param.describe_allowed()}, got {shown!r}"
    )


@pytest.mark.parametrize(
    "function, param, value",
    [
        (function, param, value)
        for function, param in _numeric("float")
        for value in (NAN, INF, -INF, *_out_of_range(param))
    ],
    ids=lambda v: v.name if isinstance(v, Param) else str(v),
)
def test_float_parameters_reject_non_finite_and_out_of_range(core, function, param, value):
    with pytest.raises(vs.Error, match=_message(function, param, value)):
        _call(core, function, param, value)


@pytest.mark.parametrize(
    "function, param, value",
    [
        (function, param, value)
        for function, param in _numeric("int")
        for value in _out_of_range(param)
    ],
    ids=lambda v: v.name if isinstance(v, Param) else str(v),
)
def test_int_parameters_reject_out_of_range(core, function, param, value):
    with pytest.raises(vs.Error, match=_message(function, param, int(value))):
        _call(core, function, param, int(value))


@pytest.mark.parametrize("function, param", _numeric("int"), ids=lambda v: getattr(v, "name", v))
@pytest.mark.parametrize("value", [NAN, INF, -INF])
def test_int_parameters_refuse_non_finite_in_vapoursynth(core, function, param, value):
    """VapourSynth's Python layer applies ``int()`` to a value for an int parameter before any
    plugin sees it, which fails for NaN and infinities: still at creation, though its message
    does not name the function."""
    with pytest.raises((ValueError, OverflowError), match="cannot convert float"):
        _call(core, function, param, value)


def test_vapoursynth_truncates_floats_given_to_int_parameters(core, monkeypatch):
    """``int()`` again: radius=1.9 reaches the plugin as 1, indistinguishable from radius=1
    (the README says so). Should VapourSynth start refusing them, this test says it."""
    from avdenoise_vs._plugin import filter as _filter

    seen = []
    real = _filter.parse_arguments
    monkeypatch.setattr(
        _filter,
        "parse_arguments",
        lambda f, p, args, **kw: seen.append(args) or real(f, p, args, **kw),
    )
    param = next(p for p in DENOISE_PARAMS if p.name == "radius")
    _call(core, "Denoise", param, 1.9)
    _call(core, "Denoise", param, True)
    assert [args["radius"] for args in seen] == [[1], [1]]


@pytest.mark.parametrize(
    "function, kwargs, message",
    [
        ("Denoise", dict(algorithm="bm3d", strength=INF), "strength must be a number from 1e-6 "
         "to 1e6, got inf"),
        ("Denoise", dict(strength=1e-300), "strength must be a number from 1e-6 to 1e6, "
         "got 1e-300"),
        ("Denoise", dict(wref=1e10), r"wref must be a number from 0 to 1e6, got 10000000000.0"),
        ("Denoise", dict(algorithm="bm3d", lambda_ht=-INF),
         r"lambda_ht must be a number > 0 and at most 1e6, got -inf"),
        ("BM3D", dict(sigma=[3.0, INF]),
         r"sigma must be a list of 1 to 3 items, each item a number from 0 to 1e6, "
         r"got \[3.0, inf\]"),
        ("BM3D", dict(sigma=[NAN]), r"sigma must be .* from 0 to 1e6, got \[nan\]"),
        ("BM3D", dict(sigma=[2.0, 1.0, -1.0]), r"sigma must be .*, got \[2.0, 1.0, -1.0\]"),
        ("NLMeans", dict(h=NAN), "h must be a number from 1e-6 to 1e6, got nan"),
    ],
)  # fmt: skip
def test_messages_read_well(core, function, kwargs, message):
    clip = core.std.BlankClip(width=32, height=24, format=vs.YUV420P8, length=3)
    with pytest.raises(vs.Error, match=rf"avdenoise\.{function}: {message}"):
        getattr(core.avdenoise, function)(clip, **kwargs)
