"""GPU clips end to end (VapourSynth R80+ with a Vulkan device, and CUDA on the same GPU):
``std.GPUUpload`` → ``avdenoise`` → ``std.GPUDownload`` gives exactly what the CPU clip gives
on the CUDA backend, the filter takes its inputs as GPU clips (no ``GPUDownload`` inserted
before it) and its output stays on the GPU; imports over their bound are dropped while frames
run, and no fd is left behind per frame. Skipped without CuPy and a CUDA device, without a
usable Vulkan device, or where the bridge takes no GPU clips (``_native/gpu_frames.h``).

On the GPU machine: ``python -m pytest -q tests/cuda/test_gpu_frames_cuda.py``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from ._gpu import require_cuda

vs = pytest.importorskip("vapoursynth")
require_cuda()

from ..vsclips import clip_from_planes, frame_planes, random_planes  # noqa: E402

pytestmark = pytest.mark.gpu
LENGTH = 7


@pytest.fixture(scope="module")
def gpu_core(core):
    """The core, once a GPU clip goes through the bridge on the GPU; else the module skips."""
    try:
        devices, info = core.vulkan_devices, core.vulkan_device_info
    except (vs.Error, AttributeError) as error:
        pytest.skip(f"no Vulkan device ({error})")
    if not devices or not info.get("export_handle_type"):
        pytest.skip(f"no Vulkan device that exports its frames ({devices}, {info})")
    if not core.avdenoise.Denoise.return_signature.startswith("clip:vnode:all"):
        pytest.skip("this bridge takes no GPU clips (built without VSVulkan4.h, or for another "
                    "VapourSynth release)")  # fmt: skip
    try:
        core.std.GPUUpload(core.std.BlankClip(format=vs.GRAY8, length=1)).get_frame(0)
    except vs.Error as error:
        pytest.skip(f"GPUUpload fails here ({error})")
    return core


def make_clip(core, format_id, width=328, height=186, seed=0):
    """Random frames, rows VapourSynth pads (328 8-bit samples: 384-byte strides and more)."""
    fmt = core.get_video_format(format_id)
    frames = [random_planes(fmt, width, height, seed + n) for n in range(LENGTH)]
    return clip_from_planes(core, fmt, frames)


def assert_gpu_path(node) -> None:
    """`node`, one of our filters, took the GPU frame path: its inputs are GPU clips (the core
    inserted no GPUDownload before it, as it would for a plain ``vnode`` argument) and its
    output, frames included, is GPU resident."""
    assert node.gpu_resident
    inputs = node.dependencies
    assert inputs and all(i.gpu_resident for i in inputs), [i.node_name for i in inputs]
    assert not any(i.node_name == "GPUDownload" for i in inputs)
    assert node.get_frame(0).gpu_resident


def assert_same(gpu_clip, cpu_clip, order=range(LENGTH)) -> None:
    """The GPU clip's frames (downloaded) equal the CPU clip's, bit for bit, and the filter
    took the GPU path; frames are asked for in `order`, several at once."""
    assert_gpu_path(gpu_clip)
    assert not cpu_clip.gpu_resident
    down = gpu_clip.std.GPUDownload()
    futures = [(n, down.get_frame_async(n)) for n in order]
    for n, future in futures:
        frame = future.result()
        want = cpu_clip.get_frame(n)
        for p, (got, expected) in enumerate(
            zip(frame_planes(frame), frame_planes(want), strict=True)
        ):
            np.testing.assert_array_equal(got, expected, err_msg=f"frame {n}, plane {p}")
        assert frame.props["AvdenoiseBackend"] == "cuda"


@pytest.mark.parametrize("radius", [0, 1])
@pytest.mark.parametrize("format_id", [vs.YUV420P8, vs.GRAYS, vs.YUV444P16])
def test_nlmeans_of_a_gpu_clip_equals_the_cpu_clip_s(gpu_core, format_id, radius):
    """NLMeans' default channels denoise luma: YUV's chroma is passed through on the device."""
    clip = make_clip(gpu_core, format_id)
    args = dict(d=radius, a=2, s=2, h=1.5, device="cuda")
    gpu = gpu_core.avdenoise.NLMeans(gpu_core.std.GPUUpload(clip), **args)
    assert_same(gpu, gpu_core.avdenoise.NLMeans(clip, **args))


@pytest.mark.parametrize("radius", [0, 1])
@pytest.mark.parametrize(
    "format_id, chroma, sigma",
    [(vs.GRAYS, False, [3.0]), (vs.YUV444PS, True, [3.0]), (vs.YUV420P8, False, [3.0, 0.0])],
)
def test_bm3d_of_a_gpu_clip_equals_the_cpu_clip_s(gpu_core, format_id, chroma, sigma, radius):
    clip = make_clip(gpu_core, format_id)
    args = dict(sigma=sigma, radius=radius, chroma=chroma, device="cuda")
    gpu = gpu_core.avdenoise.BM3D(gpu_core.std.GPUUpload(clip), **args)
    assert_same(gpu, gpu_core.avdenoise.BM3D(clip, **args))


def test_frames_out_of_order_and_a_guide_clip(gpu_core):
    clip, guide = make_clip(gpu_core, vs.YUV420P10), make_clip(gpu_core, vs.YUV420P10, seed=40)
    args = dict(radius=1, strength=2.0, channels="lumachroma", device="auto")
    up = gpu_core.std.GPUUpload
    gpu = gpu_core.avdenoise.Denoise(up(clip), ref=up(guide), **args)
    cpu = gpu_core.avdenoise.Denoise(clip, ref=guide, **{**args, "device": "cuda"})
    order = [int(n) for n in np.random.default_rng(3).permutation(3 * LENGTH) % LENGTH]
    assert_same(gpu, cpu, order)


def test_a_gpu_chain_stays_on_the_gpu(gpu_core):
    """Vulkan filter → ours → ours → Vulkan filter: every step GPU resident, and the frames
    those of the same chain with ours on CPU frames between the same Vulkan filters."""
    clip = make_clip(gpu_core, vs.GRAYS)
    up, down = gpu_core.std.GPUUpload, gpu_core.std.GPUDownload
    inverted = up(clip).std.Invert()
    first = gpu_core.avdenoise.NLMeans(inverted, d=0, h=1.0)
    second = gpu_core.avdenoise.BM3D(first, sigma=2.0)
    out = second.std.Invert()
    assert all(c.gpu_resident for c in (inverted, first, second, out))
    assert_gpu_path(first), assert_gpu_path(second)
    host = gpu_core.avdenoise.BM3D(
        gpu_core.avdenoise.NLMeans(down(inverted), d=0, h=1.0, device="cuda"),
        sigma=2.0, device="cuda",
    )  # fmt: skip
    assert_same_frames(down(out), down(up(host).std.Invert()))


def assert_same_frames(got_clip, want_clip) -> None:
    for n in range(LENGTH):
        for got, want in zip(
            frame_planes(got_clip.get_frame(n)), frame_planes(want_clip.get_frame(n)), strict=True
        ):
            np.testing.assert_array_equal(got, want, err_msg=f"frame {n}")


def test_nothing_to_denoise_passes_the_gpu_frames_through(gpu_core):
    clip = make_clip(gpu_core, vs.YUV420P8)
    out = gpu_core.avdenoise.BM3D(gpu_core.std.GPUUpload(clip), sigma=0.0)
    assert_gpu_path(out)  # the centre frame's GPU planes, shared
    assert_same_frames(out.std.GPUDownload(), clip)


def test_gpu_clips_refuse_the_cpu_and_a_cpu_guide(gpu_core):
    clip = make_clip(gpu_core, vs.GRAY8)
    gpu = gpu_core.std.GPUUpload(clip)
    with pytest.raises(vs.Error, match=r"avdenoise\.Denoise: device must be 'cuda' or 'auto' "
                       r"for a GPU clip, got 'cpu'"):  # fmt: skip
        gpu_core.avdenoise.Denoise(gpu, device="cpu")
    with pytest.raises(vs.Error, match=r"avdenoise\.NLMeans: clip and rclip must both be GPU "
                       r"or both CPU clips"):  # fmt: skip
        gpu_core.avdenoise.NLMeans(gpu, rclip=clip)


@pytest.fixture
def made_imports(monkeypatch):
    """Every ``Imports`` the CUDA backends make from now on (their import counts)."""
    from avdenoise_vs._backends.cuda import backend

    made = []

    class Recorded(backend.Imports):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(backend, "Imports", Recorded)
    return made


def test_imports_over_their_bound_are_dropped_while_frames_run(gpu_core, monkeypatch, made_imports):
    """Planes of 36 MiB take several of VapourSynth's blocks: with room for one import, every
    frame in flight keeps its own and the rest are released under it, frames still exact."""
    from avdenoise_vs._cuda import vkimport

    monkeypatch.setattr(vkimport, "MAX_IMPORTS", 1)
    clip = make_clip(gpu_core, vs.GRAYS, width=4096, height=2304)
    args = dict(d=0, a=2, s=1, h=1.5, device="cuda")
    gpu = gpu_core.avdenoise.NLMeans(gpu_core.std.GPUUpload(clip), **args)
    assert_same(gpu, gpu_core.avdenoise.NLMeans(clip, **args), order=[3, 0, 6, 1, 5, 2, 4])
    imports = made_imports[-1]
    assert imports.limit == 1 and imports.imported > 1, imports.imported
    assert len(imports) <= 1


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_no_fd_is_left_behind_per_frame(gpu_core):
    """Every export is a new fd: the bridge closes them all, an import consumes its own."""
    fmt = gpu_core.get_video_format(vs.YUV420P8)
    frames = [random_planes(fmt, 328, 186, n) for n in range(8)]
    clip = clip_from_planes(gpu_core, fmt, frames).std.Loop(times=8)  # 64 frames
    out = gpu_core.avdenoise.NLMeans(gpu_core.std.GPUUpload(clip), d=1, h=1.2, device="cuda")
    for n in range(8):  # the first frames: imports made, threads started
        out.get_frame(n)
    before = _open_fds()
    for n in range(8, clip.num_frames):
        out.get_frame(n)
    assert _open_fds() - before <= 16  # one fd per plane and frame would be 600 (56 x 12)
