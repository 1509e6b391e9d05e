"""Output frames say which backend made them: the AvdenoiseBackend frame property."""

from __future__ import annotations

import pytest
import vapoursynth as vs

from avdenoise_vs._plugin import filter as _filter
from avdenoise_vs._plugin.filter import BACKEND_PROPERTY


@pytest.mark.parametrize(
    "function, kwargs",
    [
        ("Denoise", dict(device="cpu")),
        ("Denoise", dict(algorithm="bm3d", device="cpu", channels="luma")),
        ("NLMeans", dict()),  # device='auto': the CPU here, unless a GPU is present
        ("BM3D", dict(sigma=[0.0])),  # every plane passed through: the CPU backend does nothing
    ],
)
def test_every_output_frame_names_its_backend(core, function, kwargs):
    clip = core.std.BlankClip(width=32, height=24, format=vs.YUV444P8, length=3)
    clip = core.std.SetFrameProps(clip, MyProp=42, AvdenoiseBackend="stale")
    out = getattr(core.avdenoise, function)(clip, **kwargs)
    frame_backends = {out.get_frame(n).props[BACKEND_PROPERTY] for n in range(3)}
    assert frame_backends <= {"cpu", "cuda"} and len(frame_backends) == 1
    if kwargs.get("device") == "cpu" or "sigma" in kwargs:
        assert frame_backends == {"cpu"}
    assert out.get_frame(1).props["MyProp"] == 42  # the source's properties stay


@pytest.mark.parametrize("value", [7, 2.5, "cpu"])
def test_the_bridge_sets_ints_floats_and_strings(core, monkeypatch, value):
    """plan.props is generic: the bridge copies each value onto every output frame."""
    monkeypatch.setattr(_filter, "backend_name", lambda backend: value)
    clip = core.std.BlankClip(width=32, height=24, format=vs.GRAY8, length=2)
    assert core.avdenoise.Denoise(clip, device="cpu").get_frame(1).props[BACKEND_PROPERTY] == value


def test_the_bridge_rejects_other_values_on_the_first_frame(core, monkeypatch):
    monkeypatch.setattr(_filter, "backend_name", lambda backend: [1, 2])
    clip = core.std.BlankClip(width=32, height=24, format=vs.GRAY8, length=2)
    out = core.avdenoise.Denoise(clip, device="cpu")
    with pytest.raises(vs.Error, match=r"plan\.props must map strings to ints, floats or strings"):
        out.get_frame(0)


def test_the_bridge_reads_props_after_the_first_frame(core, monkeypatch):
    """A plan may settle its properties in its first frame's process (a deferred warm-up)."""
    named = iter(["first", "later"])
    monkeypatch.setattr(_filter, "backend_name", lambda backend: next(named))
    original = _filter.FilterPlan._use
    plans = []

    def use(plan, backend):
        original(plan, backend)
        if not plans:  # the constructor's call: the first frame renames the backend
            plans.append(plan)
            process = plan.process

            def first(*args):
                original(plan, backend)
                plan.process = process
                return process(*args)

            plan.process = first

    monkeypatch.setattr(_filter.FilterPlan, "_use", use)
    clip = core.std.BlankClip(width=32, height=24, format=vs.GRAY8, length=3)
    out = core.avdenoise.Denoise(clip, device="cpu")
    assert {out.get_frame(n).props[BACKEND_PROPERTY] for n in range(3)} == {"later"}
