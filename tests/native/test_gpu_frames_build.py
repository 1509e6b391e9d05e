"""The bridge with and without GPU frames (``_native/gpu_frames.h``): it builds against headers
without VSVulkan4.h (VapourSynth R79) and then registers plain ``vnode`` clips, as it does
when the running library is not the release its GPU frames were built for; the installed
build, against a vapoursynth that ships VSVulkan4.h, registers ``vnode:all`` and marks every
clip it hands to Python with its residency.

The variants are compiled here with the flags setup.py uses and loaded into a core of their
own (autoloading off, in a subprocess), since the installed bridge owns ``avdenoise`` in
every other core.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from avdenoise_vs._plugin import bridge

from ._bridge_build import build, needs_compiler, needs_gpu_api, vs

#: A core without autoloading: the variant under test is the only avdenoise there.
_REGISTERED = """
import json, sys
import vapoursynth as vs

class Policy(vs.EnvironmentPolicy):
    def on_policy_registered(self, api):
        self.env = api.create_environment(vs.DISABLE_AUTO_LOADING)
    def on_policy_cleared(self):
        pass
    def get_current_environment(self):
        return self.env
    def set_environment(self, env):
        old, self.env = self.env, env
        return old
    def is_alive(self, env):
        return env is self.env

vs.register_policy(Policy())
vs.core.std.LoadPlugin(sys.argv[1])
functions = vs.core.avdenoise.functions()
print(json.dumps({f.name: [f.signature, f.return_signature] for f in functions}))
"""


def _registered(library: Path) -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _REGISTERED, str(library)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _assert_plain(functions: dict[str, list[str]]) -> None:
    assert set(functions) == {"Denoise", "NLMeans", "BM3D"}
    for signature, returned in functions.values():
        assert signature.startswith("clip:vnode;") and ":all" not in signature
        assert returned == "clip:vnode;"


@pytest.mark.slow
@needs_compiler
def test_without_vsvulkan4_the_bridge_builds_and_registers_plain_clips(tmp_path) -> None:
    library = build(tmp_path, gpu_release=None)
    symbols = subprocess.run(["nm", "-D", str(library)], capture_output=True, text=True).stdout
    assert "gpu_frames" not in symbols
    _assert_plain(_registered(library))


@pytest.mark.slow
@needs_compiler
@needs_gpu_api
def test_gpu_frames_built_for_another_release_stay_off(tmp_path) -> None:
    """The Vulkan table has no stable layout: a bridge built for another release must not
    use it, and keeps the CPU path (VapourSynth then downloads GPU clips for it)."""
    _assert_plain(_registered(build(tmp_path, gpu_release=vs.__version__.release_major - 1)))


@pytest.mark.slow
@needs_compiler
@needs_gpu_api
def test_gpu_frames_built_for_this_release_take_either_residency(tmp_path) -> None:
    functions = _registered(build(tmp_path, gpu_release=vs.__version__.release_major))
    assert functions["NLMeans"][0].startswith("clip:vnode:all;")
    assert "rclip:vnode:all:opt;" in functions["NLMeans"][0]
    assert "ref:vnode:all:opt;" in functions["Denoise"][0]
    assert all(returned == "clip:vnode:all;" for _, returned in functions.values())


@needs_gpu_api
def test_the_installed_bridge_takes_either_residency(core) -> None:
    for function in core.avdenoise.functions():
        assert function.signature.startswith("clip:vnode:all;"), function.signature
        assert function.return_signature == "clip:vnode:all;"


@needs_gpu_api
def test_cpu_clips_reach_python_marked_as_cpu_clips(core, monkeypatch) -> None:
    seen = []

    def spy(name, args):
        seen.append(args)
        raise ValueError("spy: no filter")

    monkeypatch.setattr(bridge, "create", spy)
    clip = core.std.BlankClip(format=vs.GRAY8, width=16, height=16, length=1)
    with pytest.raises(vs.Error, match="spy: no filter"):
        core.avdenoise.Denoise(clip, ref=clip)
    assert seen[0]["clip"][0]["gpu"] is False and seen[0]["ref"][0]["gpu"] is False
    assert "vulkan_uuid" not in seen[0]["clip"][0]
