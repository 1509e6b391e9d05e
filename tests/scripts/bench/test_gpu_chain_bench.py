"""scripts/bench/gpu_chain_bench.py: the chains it builds, vsfeel's arguments read from its
signature, and a run without a Vulkan device that ends in a table of n/a rows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import gpu_chain_bench as bench
import pytest

BENCH = Path(__file__).resolve().parents[3] / "scripts" / "bench"


def test_vsfeel_gets_the_arguments_its_signature_has() -> None:
    calls = []

    def bm3d(clip, **kwargs):
        calls.append(kwargs)
        return clip

    bm3d.signature = (
        "clip:vnode:gpu;sigma:float[]:opt;radius:int:opt;block_step:int:opt;chroma:int:opt;"
    )
    core = SimpleNamespace(vsfeel=SimpleNamespace(BM3D=bm3d))
    assert bench._vsfeel(core, "clip", "bm3d", dict(sigma=3.0, radius=1)) == "clip"
    assert calls == [dict(sigma=3.0, radius=1, block_step=8, chroma=False)]
    with pytest.raises(LookupError, match="vsfeel has none of"):
        bench._vsfeel(core, "clip", "nlm", {})
    with pytest.raises(LookupError, match="vsfeel is not installed"):
        bench._vsfeel(SimpleNamespace(), "clip", "nlm", {})


def test_every_case_and_chain_is_known() -> None:
    assert set(bench.CHAINS) == {"chain", "gpu", "host", "vsfeel"}
    for fmt, kind, _ in bench.CASES.values():
        assert kind in ("nlm", "bm3d") and fmt in ("YUV420P8", "YUV420P16", "GRAYS")


@pytest.mark.slow
def test_without_vulkan_every_row_is_n_a(tmp_path: Path) -> None:
    pytest.importorskip("vapoursynth")
    env = dict(os.environ, VK_DRIVER_FILES=str(tmp_path / "none.json"), VK_ICD_FILENAMES="")
    out = tmp_path / "chain.json"
    command = [sys.executable, str(BENCH / "gpu_chain_bench.py"), "--frames", "2",
               "--cases", "BM3D r0 luma", "--chains", "chain,gpu", "--json", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    if done.returncode == 0:
        pytest.skip("this machine has a usable Vulkan device")
    assert done.returncode == 1, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("BM3D r0 luma")]
    assert len(rows) == 2 and all(" n/a (" in row for row in rows)
    assert out.is_file()


def test_an_nlm_row_is_in_a_format_vsfeel_takes() -> None:
    # vsfeel's NLMeans refuses 8-bit clips, so a 16-bit row keeps its chain comparable.
    nlm_formats = {fmt for fmt, kind, _ in bench.CASES.values() if kind == "nlm"}
    assert "YUV420P16" in nlm_formats


def test_the_profile_gives_each_node_and_part_in_ms_per_frame() -> None:
    import _chain_profile as profile

    nodes = {"upload": SimpleNamespace(timings=4_000_000), "ours": SimpleNamespace(timings=10_000)}
    assert profile.node_ms(nodes, 2) == {"upload": 2.0, "ours": 0.005}

    clock = profile.PathClock()

    def work(value):
        return value * 2

    timed = clock._timed("imports", work)
    assert timed(21) == 42 and timed(1) == 2  # the wrapped function's result, unchanged
    with pytest.raises(TypeError):
        timed()  # and its errors, still counted
    per_frame = clock.per_frame(3)
    assert per_frame["imports_made"] == 3 and clock.ns["imports"] > 0
    assert per_frame["process"] == 0.0
    text = profile.line({"nodes": {"ours": 1.5}, "path": {"process": 1.2}})
    assert text == "ours=1.5 py.process=1.2"


def test_every_profiled_part_exists_in_the_package() -> None:
    import importlib

    import _chain_profile as profile

    for _, module, cls, method in profile.PARTS:
        assert callable(getattr(getattr(importlib.import_module(module), cls), method))
