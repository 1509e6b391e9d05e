"""String values take any case, for every choice and pattern of every table: the validation
layer turns them into the table's spelling, so 'NLM', 'CPU' and 'CUDA:0' mean what 'nlm',
'cpu' and 'cuda:0' do."""

from __future__ import annotations

import numpy as np
import pytest
import vapoursynth as vs

from avdenoise_vs._params import BM3D_PARAMS, DENOISE_PARAMS, NLMEANS_PARAMS
from avdenoise_vs._params.spec import LIST_KINDS, Choice, Pattern, parse_arguments

from ..vsclips import clip_from_planes, frame_planes, random_planes

TABLES = {"Denoise": DENOISE_PARAMS, "NLMeans": NLMEANS_PARAMS, "BM3D": BM3D_PARAMS}
#: Values of each pattern a script may write, in their table spelling.
PATTERN_VALUES = {"device": ("auto", "cpu", "cuda", "cuda:0", "cuda:12")}
SPELLINGS = (str.upper, str.lower, str.title, str.swapcase)


def _cases():
    for function, table in TABLES.items():
        for param in table:
            if isinstance(param.allowed, Choice):
                values = param.allowed.values
            elif isinstance(param.allowed, Pattern):
                values = PATTERN_VALUES[param.name]
            else:
                continue
            for value in values:
                yield pytest.param(function, param, value, id=f"{function}-{param.name}-{value}")


@pytest.mark.parametrize("function, param, value", list(_cases()))
def test_every_string_value_takes_any_case(function, param, value):
    table = TABLES[function]
    algorithm = "bm3d" if function == "BM3D" else "nlm"
    selector = {"algorithm_key": "algorithm"} if function == "Denoise" else {"algorithm": algorithm}
    for spell in SPELLINGS:
        written = spell(value)
        # VapourSynth passes every argument as a list: a scalar's one item, a list's items.
        got = parse_arguments(function, table, {param.name: [written]}, **selector)
        want = [value] if param.kind in LIST_KINDS else value
        assert got[param.name] == want, (written, got[param.name])


def test_algorithm_in_any_case_selects_it():
    """'BM3D' selects bm3d before the other arguments are checked against it."""
    values = parse_arguments(
        "Denoise", DENOISE_PARAMS, {"algorithm": ["BM3D"], "stages": [1]}, algorithm_key="algorithm"
    )
    assert values["algorithm"] == "bm3d" and values["radius"] == 0
    with pytest.raises(ValueError, match=r"algorithm must be one of 'nlm', 'bm3d', got 'NLMx'"):
        parse_arguments("Denoise", DENOISE_PARAMS, {"algorithm": ["NLMx"]}, "algorithm")


def test_the_tables_hold_one_spelling_per_value():
    """Folding is unambiguous: no two values of a choice differ only in case."""
    for table in TABLES.values():
        for param in table:
            if isinstance(param.allowed, Choice):
                folded = [v.casefold() for v in param.allowed.values]
                assert len(set(folded)) == len(folded), param.name


@pytest.mark.parametrize(
    "function, written, spelled",
    [
        ("Denoise", dict(algorithm="NLM", channels="YUV", device="CPU", strength=20.0),
         dict(algorithm="nlm", channels="yuv", device="cpu", strength=20.0)),
        ("Denoise", dict(algorithm="BM3D", channels="Luma", device="Auto", accelerators=["CPU"]),
         dict(algorithm="bm3d", channels="luma", device="auto", accelerators=["cpu"])),
        ("BM3D", dict(device="Cpu", accelerators=["Cpu"], sigma=[5.0]),
         dict(device="cpu", accelerators=["cpu"], sigma=[5.0])),
        ("NLMeans", dict(channels="yuv", h=20.0), dict(channels="YUV", h=20.0)),
    ],
)  # fmt: skip
def test_filters_give_the_same_frames_in_any_case(core, function, written, spelled):
    fmt = core.get_video_format(vs.YUV444P8)
    clip = clip_from_planes(core, fmt, [random_planes(fmt, 24, 16, seed=n) for n in range(3)])
    as_written = getattr(core.avdenoise, function)(clip, **written)
    in_table_case = getattr(core.avdenoise, function)(clip, **spelled)
    got, want = as_written.get_frame(1), in_table_case.get_frame(1)
    assert got.props["AvdenoiseBackend"] == "cpu"
    for g, w in zip(frame_planes(got), frame_planes(want), strict=True):
        np.testing.assert_array_equal(g, w)
    assert not np.array_equal(frame_planes(got)[0], frame_planes(clip.get_frame(1))[0])
