"""The warm-up key of real passes: what the kernels are compiled for, nothing else.

Built from the CUDA passes' own specs (``NlmPass.spec``, ``Bm3dPass.spec``), which need no
GPU, so that a setting that only reaches the kernels' arguments (strength, thresholds, the
frame size) is shown to share a warm cache, and one that changes their code is not.
"""

from __future__ import annotations

import dataclasses
import sys
import types

import pytest

from avdenoise_vs._bm3d.cuda.bm3d_pass import Bm3dPass
from avdenoise_vs._nlm.cuda.nlm_pass import NlmPass, choose_tile_height
from avdenoise_vs._params.options import ColorFamily, Distance, FrameLayout, SampleType, WeightMode
from avdenoise_vs._params.settings import Bm3dSettings, NlmSettings, PassSettings, Stages
from avdenoise_vs._warmup.queue import environment_fingerprint, kernel_key

__all__: list[str] = []

ENVIRONMENT = "cupy=14.2.0;nvrtc=13.0;sm=90"
"""A stand-in for `environment_fingerprint`."""
SHARED_LIMIT = 227 * 1024
"""Shared memory per block of an H200, which decides the NLM tile height."""

NLM = NlmSettings(
    planes=(0,), distance=Distance.LUMA, strength=1.2, radius=1, has_ref=False,
    search_radius=2, patch_radius=4, wmode=WeightMode.WELSCH, wref=1.0,
)  # fmt: skip
BM3D = Bm3dSettings(
    planes=(0,), distance=Distance.LUMA, plane_strengths=(3.0,), radius=0, stages=Stages.BOTH,
    lambda_ht=2.7, mismatch_scale=1.0, block_step=3, bm_range=19, ps_num=2, ps_range=4,
)  # fmt: skip
#: Another strength, for each pass (a BM3D pass holds one per plane).
OTHER_STRENGTH = {NLM: {"strength": 7.5}, BM3D: {"plane_strengths": (7.5,)}}
TINY_STRENGTH = {NLM: {"strength": 0.3}, BM3D: {"plane_strengths": (0.3,)}}


def _layout(width: int = 64, height: int = 48, bits: int = 8) -> FrameLayout:
    sample = SampleType.FLOAT if bits == 32 else SampleType.INTEGER
    return FrameLayout(width, height, ColorFamily.GRAY, 0, 0, bits, sample)


def _spec(options: PassSettings, layout: FrameLayout):
    """The spec the CUDA backend would build for this pass (see ``_cuda/backend.py``)."""
    pitch = {0: -(-layout.width * layout.dtype.itemsize // 512) * 512}
    if isinstance(options, Bm3dSettings):
        return Bm3dPass(options, layout, {0: 0}, pitch).spec
    probe = NlmPass(options, layout, {0: 0}, {0: 0}, pitch, 32)
    tile_height = choose_tile_height(probe.spec, SHARED_LIMIT)
    return NlmPass(options, layout, {0: 0}, {0: 0}, pitch, tile_height).spec


def _key(options: PassSettings, layout: FrameLayout | None = None, **changes: object) -> int:
    options = dataclasses.replace(options, **changes)
    return kernel_key([_spec(options, layout or _layout())], environment=ENVIRONMENT)


@pytest.mark.parametrize("options", [NLM, BM3D], ids=["nlm", "bm3d"])
def test_strength_and_frame_size_share_a_key(options: PassSettings) -> None:
    key = _key(options)
    assert _key(options, **OTHER_STRENGTH[options]) == key
    assert _key(options, _layout(1920, 1080)) == key
    assert _key(options, _layout(33, 17), **TINY_STRENGTH[options]) == key


def test_nlm_launch_settings_share_a_key() -> None:
    assert _key(NLM, wref=0.5) == _key(NLM)


def test_bm3d_launch_settings_share_a_key() -> None:
    key = _key(BM3D)
    assert _key(BM3D, lambda_ht=3.5, mismatch_scale=2.0, block_step=8) == key


@pytest.mark.parametrize(
    ("stages", "launched"),
    [
        (Stages.HARD_THRESHOLD, ("bm3d_load", "bm3d_hard", "bm3d_finish")),
        (Stages.WIENER, ("bm3d_load", "bm3d_wiener", "bm3d_finish")),
        (Stages.BOTH, ("bm3d_load", "bm3d_hard", "bm3d_wiener", "bm3d_finish")),
    ],
)
def test_bm3d_stages_choose_the_kernels_compiled(stages: Stages, launched: tuple) -> None:
    """A pass compiles only the kernels its stages launch, so its stages are in the key."""
    assert _spec(dataclasses.replace(BM3D, stages=stages), _layout()).kernels == launched
    assert (_key(BM3D, stages=stages) == _key(BM3D)) == (stages is Stages.BOTH)


@pytest.mark.parametrize(
    "changes",
    [{"patch_radius": 3}, {"search_radius": 5}, {"radius": 0}, {"wmode": WeightMode.BISQUARE_A}],
    ids=["patch_radius", "search_radius", "radius", "wmode"],
)
def test_nlm_kernel_settings_change_the_key(changes: dict[str, object]) -> None:
    assert _key(NLM, **changes) != _key(NLM)


@pytest.mark.parametrize(
    "changes",
    [{"bm_range": 9}, {"radius": 1}],
    ids=["bm_range", "radius"],
)
def test_bm3d_kernel_settings_change_the_key(changes: dict[str, object]) -> None:
    assert _key(BM3D, **changes) != _key(BM3D)


@pytest.mark.parametrize("options", [NLM, BM3D], ids=["nlm", "bm3d"])
@pytest.mark.parametrize("bits", [16, 32])
def test_sample_type_changes_the_key(options: PassSettings, bits: int) -> None:
    assert _key(options, _layout(bits=bits)) != _key(options)


def test_algorithm_changes_the_key() -> None:
    assert _key(NLM) != _key(BM3D)


class _FakeRuntime:
    """``cupy.cuda.runtime`` of a host whose devices have `capabilities` ("90": 9.0)."""

    def __init__(self, capabilities: tuple[str, ...]) -> None:
        self.capabilities = capabilities

    def getDevice(self) -> int:
        return 0

    def deviceGetAttribute(self, attribute: int, device: int) -> int:
        major, minor = self.capabilities[device]
        return int(major if attribute == 75 else minor)

    def setDevice(self, device: int) -> None:
        raise AssertionError("making a device current creates its context: the key must not")


def _keys_on(monkeypatch: pytest.MonkeyPatch, capabilities: tuple[str, ...]) -> list[int]:
    """The key of one NLM backend on each device of a fake host (no GPU needed)."""
    nvrtc = types.SimpleNamespace(getVersion=lambda: (13, 0))
    runtime = _FakeRuntime(capabilities)
    cupy = types.SimpleNamespace(
        __version__="14.2.0", cuda=types.SimpleNamespace(runtime=runtime, nvrtc=nvrtc)
    )
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    environment_fingerprint.cache_clear()
    try:
        return [kernel_key([_spec(NLM, _layout())], device=i) for i in range(len(capabilities))]
    finally:
        environment_fingerprint.cache_clear()  # forget the fake host's fingerprints


def test_mixed_gpus_get_a_key_each(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = _keys_on(monkeypatch, ("90", "80"))
    assert first != second


def test_gpus_of_one_model_share_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = _keys_on(monkeypatch, ("90", "90"))
    assert first == second
