"""The bridge's frame path for GPU clips (``_native/gpu_frames.c``) without a GPU: the real C code,
built with ``gpu_frames_harness.c``'s fake VapourSynth (VapourSynth's rules kept: an exportable
frame consumes its request, every export is a new fd, frames are counted), called as the core
calls a filter. What it checks is what the GPU machine cannot show when it goes wrong: that
every frame taken is freed and every fd exported is closed on every path, failures included;
that the window reaches Python as the contract says (``gpu_frames.h``); that the exit guard
covers the path; and that a library of another API version leaves everything to the CPU path
without touching the API 4.3 calls.
"""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import POINTER, c_char_p, c_int, c_void_p
from pathlib import Path

import pytest

from ._bridge_build import build, needs_compiler, needs_gpu_api, vs

pytestmark = [needs_compiler, needs_gpu_api]

HARNESS = Path(__file__).with_name("gpu_frames_harness.c")
API_43 = (4 << 16) | 3
LENGTH = 10  # frames of the fake clips
NO = -1  # no injected failure


class Fakes(ctypes.Structure):
    """gpu_frames_harness.c's Fakes."""

    _fields_ = [
        (name, c_int)
        for name in (
            "fail_take_at", "fail_wait_at", "fail_export_at", "fail_new_frame", "handle_type",
            "fail_info", "takes", "waits", "exports", "residency_calls", "frames_alive",
            "frames_made", "props_copied",
        )
    ]  # fmt: skip


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpu_frames_native")
    library = build(
        folder, vs.__version__.release_major, gpu_source=HARNESS, included=("exit_guard.c",)
    )
    lib = ctypes.CDLL(str(library))  # its calls release the GIL, as the core's threads hold none
    lib.harness_filter.argtypes = [ctypes.py_object, *[c_int] * 6]
    lib.harness_filter.restype = c_void_p
    lib.harness_frame.argtypes = [c_void_p, c_int, c_char_p, c_int, POINTER(c_int)]
    lib.harness_frame.restype = c_void_p
    lib.harness_fakes.restype = POINTER(Fakes)
    lib.harness_residency.argtypes = [c_void_p]
    lib.harness_mark.argtypes = [ctypes.py_object, c_int, c_char_p, c_int]
    lib.harness_frame_info.argtypes = [c_void_p, *[POINTER(c_int)] * 3]
    lib.harness_free_frame.argtypes = [c_void_p]
    lib.harness_free_filter.argtypes = [c_void_p]
    assert lib.harness_init(API_43) == 1
    return lib


class Plan:
    """A plan of GPU clips: records each call, checking that every fd is open during it."""

    def __init__(self, raises: Exception | None = None, returns=None) -> None:
        self.props = {"AvdenoiseBackend": "cuda"}
        self.raises, self.returns = raises, returns
        self.calls: list[tuple] = []
        self.lock = threading.Lock()

    def process(self, n, frame_numbers, windows, dst):
        for planes in [*(frame for window in windows for frame in window), dst]:
            for fd, *_ in planes:
                os.fstat(fd)  # open until process returns
        with self.lock:
            self.calls.append((n, frame_numbers, windows, dst))
        if self.raises is not None:
            raise self.raises
        return self.returns


def exported_fds_open() -> int:
    """The harness's export fds (memory files named "avdenoise-export") still open."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            count += "avdenoise-export" in os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass
    return count


def configure(lib, take=NO, wait=NO, export=NO, new_frame=0, handle_type=1, info=0) -> Fakes:
    lib.harness_configure(take, wait, export, new_frame, handle_type, info)
    return lib.harness_fakes().contents


class Filter:
    """A filter of the harness: ``frame(n)`` asks for one output frame as the core does."""

    def __init__(self, lib, plan, inputs=1, radius=1, planes=3, copy=0b000, gpu=None) -> None:
        self.lib, self.plan = lib, plan
        gpu = (1 << inputs) - 1 if gpu is None else gpu
        self.d = lib.harness_filter(plan, inputs, radius, LENGTH, planes, copy, gpu)

    def frame(self, n: int) -> tuple[int | None, str, int]:
        """(the frame, or None; the error; requests left unconsumed)."""
        error, left = ctypes.create_string_buffer(1024), c_int()
        dst = self.lib.harness_frame(self.d, n, error, 1024, ctypes.byref(left))
        return dst, error.value.decode(), left.value

    def info(self, dst) -> tuple[int, int, int]:
        fresh, shares, ident = c_int(), c_int(), c_int()
        self.lib.harness_frame_info(dst, *(ctypes.byref(v) for v in (fresh, shares, ident)))
        return fresh.value, shares.value, ident.value

    def close(self) -> None:
        self.lib.harness_free_filter(self.d)


def window(n: int, radius: int) -> tuple[int, ...]:
    return tuple(min(max(n + t, 0), LENGTH - 1) for t in range(-radius, radius + 1))


@pytest.mark.parametrize("inputs", [1, 2])
@pytest.mark.parametrize("radius, n", [(0, 4), (1, 0), (1, 5), (2, 0), (2, LENGTH - 1), (3, 1)])
def test_a_frame_hands_its_planes_over_and_gives_everything_back(harness, inputs, radius, n):
    fakes = configure(harness)
    plan = Plan()
    f = Filter(harness, plan, inputs=inputs, radius=radius, copy=0b110)
    dst, error, left = f.frame(n)
    assert error == "" and dst
    fresh, shares, _ = f.info(dst)
    assert fresh and not shares  # a new GPU frame, sharing no exportable frame's planes
    distinct = len(set(window(n, radius)))
    assert left == 0  # each request taken for export once
    assert fakes.takes == fakes.waits == inputs * distinct
    assert fakes.exports == 3 * (inputs * distinct + 1)  # the output's copied planes too
    assert fakes.props_copied == 1
    [(got_n, numbers, windows, out)] = plan.calls
    assert (got_n, numbers) == (n, window(n, radius))
    assert len(windows) == inputs and all(len(w) == 2 * radius + 1 for w in windows)
    assert len(out) == 3
    for clip in windows:
        for t in range(1, len(clip)):  # a repeated frame (the clip's ends) repeats its tuple
            assert (clip[t] is clip[t - 1]) == (numbers[t] == numbers[t - 1])
    frames = {id(frame): frame for clip in windows for frame in clip}
    memory_ids = {planes[0][1] for planes in [*frames.values(), out]}
    assert len(memory_ids) == len(frames) + 1
    for planes in [*frames.values(), out]:
        assert [(size, offset, stride) for _, _, size, offset, stride in planes] == [
            (1 << 20, 0, 128), (1 << 20, 4096, 64), (1 << 20, 8192, 64)
        ]  # fmt: skip
    assert fakes.frames_alive == 1 and exported_fds_open() == 0
    harness.harness_free_frame(dst)
    assert fakes.frames_alive == 0
    f.close()


FAILURES = [
    (dict(take=0), "avdenoise.Test: frame 3 of input 0 cannot be taken for export: injected"),
    (dict(take=2), "avdenoise.Test: frame 5 of input 0 cannot be taken for export: injected"),
    (dict(wait=1), "avdenoise.Test: waiting for frame 4 of input 0 failed: injected wait"),
    (dict(new_frame=1), "avdenoise.Test: no GPU frame could be made for the output"),
    (dict(export=0), "avdenoise.Test: plane 0 of the output frame cannot be exported: injected"),
    (dict(export=4), "avdenoise.Test: plane 1 of frame 3 of input 0 cannot be exported: inj"),
    (dict(export=11), "avdenoise.Test: plane 2 of frame 5 of input 0 cannot be exported: inj"),
    (dict(handle_type=2), "avdenoise.Test: plane 0 of the output frame exports as handle type 2"),
]


@pytest.mark.parametrize("failure, message", FAILURES)
def test_a_failure_frees_every_frame_and_closes_every_fd(harness, failure, message):
    fakes = configure(harness, **failure)
    plan = Plan()
    f = Filter(harness, plan, radius=1)
    dst, error, _ = f.frame(4)
    assert dst is None and error.startswith(message)
    assert plan.calls == []
    assert fakes.frames_alive == 0 and exported_fds_open() == 0
    f.close()


@pytest.mark.parametrize(
    "plan, message",
    [
        (Plan(raises=ValueError("avdenoise.Test: injected")), "avdenoise.Test: injected"),
        (
            Plan(returns=(1, 2)),
            "avdenoise.Test: plan.process must return None for GPU frames, got (1, 2)",
        ),  # fmt: skip
    ],
)
def test_a_failed_plan_fails_the_frame_and_gives_everything_back(harness, plan, message):
    fakes = configure(harness)
    f = Filter(harness, plan, radius=1)
    dst, error, _ = f.frame(4)
    assert dst is None and error == message
    assert len(plan.calls) == 1
    assert fakes.frames_alive == 0 and exported_fds_open() == 0
    assert fakes.props_copied == 0
    f.close()


def test_every_plane_passed_through_shares_the_centre_frame_without_python(harness):
    fakes = configure(harness)
    plan = Plan()
    f = Filter(harness, plan, radius=0, copy=0b111)
    dst, error, _ = f.frame(3)
    assert error == "" and dst
    fresh, shares, _ = f.info(dst)
    assert not fresh and not shares  # the planes of a frame taken with getFrameFilter
    assert plan.calls == [] and fakes.takes == fakes.exports == 0
    assert fakes.props_copied == 1  # plan.props read without a process call
    harness.harness_free_frame(dst)
    assert fakes.frames_alive == 0
    f.close()


@pytest.mark.parametrize("copy", [0b000, 0b111])
def test_frames_fail_once_the_interpreter_exits(harness, copy):
    fakes = configure(harness)
    plan = Plan()
    f = Filter(harness, plan, radius=1, copy=copy)
    harness.harness_exiting(1)
    try:
        dst, error, _ = f.frame(4)
    finally:
        harness.harness_exiting(0)
    assert dst is None and error == "avdenoise: the Python interpreter is exiting"
    assert plan.calls == []
    assert fakes.frames_alive == 0 and exported_fds_open() == 0
    f.close()


def test_frames_on_several_threads_give_everything_back(harness):
    fakes = configure(harness)
    plan = Plan()
    f = Filter(harness, plan, inputs=2, radius=2, copy=0b100)
    errors = []

    def render(first: int) -> None:
        for k in range(20):
            dst, error, left = f.frame((first + k) % LENGTH)
            if error or not dst or left:
                errors.append((error, left))
            else:
                harness.harness_free_frame(dst)

    threads = [threading.Thread(target=render, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(plan.calls) == 80
    assert fakes.frames_alive == 0 and exported_fds_open() == 0
    f.close()


def test_another_api_version_leaves_every_clip_to_the_cpu_path(harness):
    """The VSVULKANAPI table has no stable layout, and getNodeResidency is API 4.3's: a library
    of another version must see the bridge as a CPU-only one, without those calls."""
    fakes = configure(harness)
    f = Filter(harness, Plan(), gpu=0b1)
    try:
        assert harness.harness_init(API_43 - 1) == 0
        assert harness.harness_residency(f.d) == 0
        args = {"clip": [{"width": 64}]}
        assert harness.harness_mark(args, 1, ctypes.create_string_buffer(64), 64) == 0
        assert args == {"clip": [{"width": 64}]}  # no residency keys
        assert fakes.residency_calls == 0
    finally:
        assert harness.harness_init(API_43) == 1
    assert harness.harness_residency(f.d) == 1
    f.close()


@pytest.mark.parametrize("gpu, residency", [(0b00, 0), (0b11, 1), (0b01, -1), (0b10, -1)])
def test_the_residency_of_a_filter_is_its_clips(harness, gpu, residency):
    configure(harness)
    f = Filter(harness, Plan(), inputs=2, gpu=gpu)
    assert harness.harness_residency(f.d) == residency
    f.close()


def test_clips_are_marked_with_their_device(harness):
    configure(harness)
    f = Filter(harness, Plan(), inputs=2, gpu=0b01)
    args = {"clip": [{}], "ref": [{}]}
    assert harness.harness_mark(args, 2, ctypes.create_string_buffer(64), 64) == 0
    uuid = bytes(i * 17 for i in range(16)).hex()
    assert args == {
        "clip": [{"gpu": True, "vulkan_uuid": uuid, "vulkan_export": 1}],
        "ref": [{"gpu": False}],
    }
    configure(harness, info=1)
    error = ctypes.create_string_buffer(256)
    assert harness.harness_mark({"clip": [{}]}, 1, error, 256) == -1
    assert error.value.decode() == (
        "avdenoise.Test: the Vulkan device cannot be read: injected device failure"
    )
    f.close()
