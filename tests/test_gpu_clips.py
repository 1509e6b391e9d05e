"""GPU clips (VapourSynth's Vulkan frames) on the Python side, without a GPU: the signatures the
bridge registers, the checks of a call whose clips the bridge marks as GPU clips
(``_native/gpu_frames.h``), and the backend such a call gets: CUDA only, on the clip's device.

The clip dicts are those the bridge hands over; the calls go straight to
``avdenoise_vs._plugin.bridge.create``, as the bridge's. ``tests/cuda/test_gpu_frames_cuda.py``
runs real GPU clips where a GPU and a Vulkan device are there.
"""

from __future__ import annotations

import re

import pytest

from avdenoise_vs._backends.reference import NumpyBackend
from avdenoise_vs._plugin import bridge
from avdenoise_vs._plugin.filter import FilterPlan

UUID = "0123456789abcdef0123456789abcdef"


def clip(gpu: bool = True, export: int = 1, width: int = 64, height: int = 48) -> dict:
    """A YUV420P8 clip's dict as the bridge makes it; `gpu` adds the Vulkan keys."""
    info = dict(
        width=width, height=height, num_frames=10, color_family=3, sample_type=0, bits=8,
        subsampling_w=1, subsampling_h=1, num_planes=3, fps_num=24, fps_den=1, gpu=gpu,
    )  # fmt: skip
    if gpu:
        info.update(vulkan_uuid=UUID, vulkan_export=export)
    return info


def create(name: str, **args) -> FilterPlan:
    return bridge.create(name, {key: v if isinstance(v, list) else [v] for key, v in args.items()})


def test_gpu_signatures_take_clips_of_either_residency() -> None:
    assert bridge.gpu_signature("clip:vnode;s:int:opt;ref:vnode:opt;v:vnode[]:opt;any;") == (
        "clip:vnode:all;s:int:opt;ref:vnode:all:opt;v:vnode[]:all:opt;any;"
    )
    plain, gpu = dict(bridge.plugin_functions()), dict(bridge.plugin_functions(True))
    assert plain.keys() == gpu.keys() == {"Denoise", "NLMeans", "BM3D"}
    for name, signature in gpu.items():
        assert signature == bridge.gpu_signature(plain[name])
        assert ":vnode;" not in signature and ":vnode:opt" not in signature
        assert len(re.findall(r":vnode:all", signature)) == len(re.findall(":vnode", plain[name]))
    assert "rclip:vnode:all:opt;" in gpu["NLMeans"] and "ref:vnode:all:opt;" in gpu["BM3D"]


def test_the_running_release_is_the_vapoursynth_module_s() -> None:
    vs = pytest.importorskip("vapoursynth")
    assert bridge.vapoursynth_release() == vs.__version__.release_major


@pytest.mark.parametrize(
    "name, args",
    [
        ("Denoise", dict(device="cpu")),
        ("NLMeans", dict(device="cpu")),
        ("BM3D", dict(device="cpu")),
        ("BM3D", dict(device="cpu", sigma=0.0)),  # refused even with nothing to denoise
    ],
)
def test_a_gpu_clip_refuses_the_cpu(name, args) -> None:
    with pytest.raises(ValueError) as error:
        create(name, clip=clip(), **args)
    assert str(error.value) == (
        f"avdenoise.{name}: device must be 'cuda' or 'auto' for a GPU clip, got 'cpu'"
    )


@pytest.mark.parametrize(
    "name, guide, clip_gpu",
    [("Denoise", "ref", True), ("NLMeans", "rclip", True), ("BM3D", "ref", False)],
)
def test_clip_and_guide_share_a_residency(name, guide, clip_gpu) -> None:
    args = {"clip": clip(clip_gpu), guide: clip(not clip_gpu)}
    if name == "Denoise":
        args["algorithm"] = "nlm"
    with pytest.raises(ValueError) as error:
        create(name, **args)
    assert str(error.value) == (
        f"avdenoise.{name}: clip and {guide} must both be GPU or both CPU clips"
    )


def test_a_device_that_exports_no_frames_is_named() -> None:
    with pytest.raises(ValueError) as error:
        create("Denoise", clip=clip(export=0))
    assert str(error.value) == (
        "avdenoise.Denoise: the Vulkan device exports frames as handle type 0, and CUDA "
        "imports opaque file descriptors (1) here; std.GPUDownload makes the clip a CPU clip"
    )


def test_a_gpu_clip_never_falls_back_to_the_cpu(monkeypatch) -> None:
    """Without the clip's CUDA device (CI has none; a GPU machine has none with this UUID),
    device='auto' is an error that says what to do, not a CPU backend."""
    monkeypatch.setenv("AVDENOISE_WARMUP", "0")
    with pytest.raises(ValueError) as error:
        create("Denoise", clip=clip())
    message = str(error.value)
    assert message.startswith("avdenoise.Denoise: a GPU clip runs on CUDA, which cannot run here (")
    assert message.endswith("); std.GPUDownload makes it a CPU clip, which device='cpu' takes")
    with pytest.raises(ValueError) as error:
        create("Denoise", clip=clip(), accelerators=["cpu"])
    assert "cannot run here (accelerators=['cpu'] leaves it out)" in str(error.value)


def test_a_gpu_clip_gets_the_cuda_backend_of_its_device(fake_cuda, vs_log) -> None:
    fake_cuda.failures = 1  # a failed warm-up keeps it: the CPU cannot take GPU frames
    plan = create("NLMeans", clip=clip(), d=1)
    assert plan.gpu and plan.inputs == ("clip",) and plan.radius == 1
    assert plan.copy_planes == (1, 2)  # NLMeans' default channels: luma
    backend = plan._pending.resolved()
    assert backend.vulkan_uuid == UUID
    stays = "no other of accelerators can run, so device='auto' stays on it"
    assert any(stays in message for message in vs_log)
    plan.close()


def test_a_cpu_clip_takes_the_cpu_path_as_before(fake_cuda) -> None:
    plan = create("Denoise", clip=clip(gpu=False), device="cpu")
    assert not plan.gpu and isinstance(plan.backend, NumpyBackend)
    assert plan.process == plan.backend.bridge_process
    plan = create("Denoise", clip=clip(gpu=False), device="cuda")
    assert plan._pending.resolved().vulkan_uuid is None


def test_a_gpu_clip_with_nothing_to_denoise_is_passed_through() -> None:
    """Every plane passed through: the bridge shares the centre frame's planes and calls no
    backend (``_native/gpu_frames.c``), so none needs the GPU."""
    plan = create("BM3D", clip=clip(), sigma=0.0)
    assert plan.gpu and plan.copy_planes == (0, 1, 2) and plan.radius == 0


def test_a_gpu_plan_whose_backend_has_no_gpu_frames_fails_its_frames(fake_cuda) -> None:
    """A GPU clip's planes are exported handles: a backend without a frame path for them
    (this fake CUDA backend has none) must fail the frame, never read them as host planes."""
    plan = create("NLMeans", clip=clip(), d=1)
    backend = plan._pending.resolved()
    backend.bridge_process = None  # reading the planes as host planes would call it
    with pytest.raises(RuntimeError, match="avdenoise: the cuda backend cannot take GPU clips"):
        plan.process(0, (0, 0, 1), ((),), ())
    plan.close()
