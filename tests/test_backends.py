"""Backend choice when a GPU backend's warm-up fails: the filter is always created.

A fake CUDA backend (``fake_cuda_backend.py``) stands in for ``CudaBackend``. CPU only.
"""

from __future__ import annotations

import numpy as np
import pytest

from avdenoise_vs._backends import select as _backends
from avdenoise_vs._backends.reference import NumpyBackend
from avdenoise_vs._warmup import queue as warmup

from .fake_cuda_backend import LAYOUT, PASSES, first_plane, random_clip

vs = pytest.importorskip("vapoursynth")

__all__: list[str] = []


def _select(device: str, accelerators=("cuda", "cpu")):
    return _backends.select_backend("Denoise", device, list(accelerators), PASSES, LAYOUT)


def _ours(messages: list[str]) -> list[str]:
    return [m for m in messages if m.startswith("avdenoise.")]


def test_auto_falls_back_to_the_cpu_with_a_warning(fake_cuda, vs_log) -> None:
    fake_cuda.failures = 1
    backend = _select("auto")
    assert isinstance(backend, NumpyBackend)
    (warning,) = _ours(vs_log)
    assert warning == (
        "avdenoise.Denoise: warming up the cuda backend failed (RuntimeError: fake NVRTC "
        "failure 1); device='auto' runs on cpu instead"
    )


def test_explicit_cuda_keeps_the_backend_and_compiles_on_its_first_frame(fake_cuda, vs_log) -> None:
    fake_cuda.failures = 1
    backend = _select("cuda")
    assert backend is fake_cuda.built[0]
    assert not backend.compiled
    (warning,) = _ours(vs_log)
    assert "warming up the cuda backend failed (RuntimeError: fake NVRTC failure 1)" in warning
    assert warning.endswith("device='cuda' stays on it; its first frame compiles the kernels again")
    assert _select("cuda:0").device_id == 0  # 'cuda:N' too


def test_auto_without_another_accelerator_keeps_the_backend(fake_cuda, vs_log) -> None:
    fake_cuda.failures = 1
    backend = _select("auto", accelerators=["cuda"])
    assert backend is fake_cuda.built[0]
    (warning,) = _ours(vs_log)
    assert "no other of accelerators can run, so device='auto' stays on it" in warning


def test_successful_warm_up_runs_on_the_gpu_without_a_word(fake_cuda, vs_log) -> None:
    backend = _select("auto")
    assert backend is fake_cuda.built[0]
    assert backend.compiled
    assert _ours(vs_log) == []


def test_a_long_cause_is_shortened(fake_cuda, vs_log, monkeypatch) -> None:
    def fail() -> None:
        raise RuntimeError("x" * 5000)

    monkeypatch.setattr(fake_cuda, "warm_up", lambda self: fail())
    _select("auto")
    (warning,) = _ours(vs_log)
    assert len(warning) < 500
    assert "xxx...)" in warning


def test_the_key_is_that_of_the_backends_kernel_specs(fake_cuda, monkeypatch) -> None:
    keys: list[int] = []
    real_warm_up = warmup.warm_up
    monkeypatch.setattr(
        warmup, "warm_up", lambda key, fn, **kw: keys.append(key) or real_warm_up(key, fn, **kw)
    )
    backend = _select("cuda")
    assert keys == [warmup.kernel_key(backend.kernel_specs(), device=backend.device_id)]


def test_unavailable_explicit_device_says_what_can_run(fake_cuda) -> None:
    fake_cuda.unavailable = "no CUDA device found"
    with pytest.raises(
        ValueError,
        match=r"^avdenoise\.Denoise: device='cuda' cannot run here "
        r"\(cuda: no CUDA device found\); device='auto' or 'cpu' runs anywhere$",
    ):
        _select("cuda")  # fmt: skip
    with pytest.raises(
        ValueError,
        match=r"device='auto' cannot run here with "
        r"accelerators=\['cuda'\] \(cuda: no CUDA device found\); 'cpu' runs",
    ):
        _select("auto", accelerators=["cuda"])  # fmt: skip


# --- through VapourSynth: what a script sees --------------------------------------------------


def test_script_with_a_failed_warm_up_gets_the_cpu_frames(core, fake_cuda, vs_log) -> None:
    fake_cuda.failures = 1
    clip = random_clip(core)
    expected = first_plane(core.avdenoise.Denoise(clip, device="cpu").get_frame(1))
    auto = core.avdenoise.Denoise(clip)
    np.testing.assert_array_equal(first_plane(auto.get_frame(1)), expected)
    assert any("device='auto' runs on cpu instead" in m for m in vs_log)


def test_script_with_explicit_cuda_retries_once_then_fails_the_frame(
    core, fake_cuda, vs_log
) -> None:
    clip = random_clip(core)
    fake_cuda.failures = 1
    retried = core.avdenoise.Denoise(clip, device="cuda")  # created despite the failure
    expected = first_plane(core.avdenoise.Denoise(clip, device="cpu").get_frame(2))
    np.testing.assert_array_equal(first_plane(retried.get_frame(2)), expected)
    assert fake_cuda.built[0].compiles == 2
    fake_cuda.failures = 2
    failing = core.avdenoise.Denoise(clip, device="cuda")
    with pytest.raises(vs.Error, match="fake NVRTC failure 2"):
        failing.get_frame(0)


def test_auto_says_once_that_it_runs_on_the_cpu_and_what_to_install(
    fake_cuda, vs_log, monkeypatch
) -> None:
    monkeypatch.setattr(_backends, "_fallback_told", False)
    fake_cuda.unavailable = "CuPy cannot be imported (No module named 'cupy')"
    assert isinstance(_select("auto"), NumpyBackend)
    assert isinstance(_select("auto"), NumpyBackend)
    (notice,) = _ours(vs_log)
    assert notice.startswith(
        "avdenoise.Denoise: no GPU backend can run (cuda: CuPy cannot be imported"
    )
    assert "device='auto' runs on the CPU, which is exact but slow" in notice
    assert "pip install 'cupy-cuda13x[ctk]>=14.1' for a CUDA 13 driver" in notice


def test_only_cuda_asked_for_by_name_says_why_the_driver_failed(
    fake_cuda, vs_log, monkeypatch
) -> None:
    monkeypatch.setattr(_backends, "_fallback_told", False)
    fake_cuda.unavailable = "no usable CUDA driver (cudaErrorInsufficientDriver)"
    fake_cuda.unavailable_detail = "no NVIDIA driver found (libcuda.so.1: cannot open)"
    assert isinstance(_select("auto"), NumpyBackend)
    (notice,) = _ours(vs_log)
    assert "libcuda" not in notice
    for device in ("cuda", "cuda:1"):
        with pytest.raises(ValueError) as raised:
            _select(device)
        message = str(raised.value)
        assert message.count("no NVIDIA driver found (libcuda.so.1: cannot open)") == 1, message
        assert f"device={device!r} cannot run here (cuda: no usable CUDA driver" in message


def test_explicit_cpu_says_nothing(fake_cuda, vs_log, monkeypatch) -> None:
    monkeypatch.setattr(_backends, "_fallback_told", False)
    fake_cuda.unavailable = "no CUDA device found"
    assert isinstance(_select("cpu"), NumpyBackend)
    assert _ours(vs_log) == []


def test_a_device_whose_context_fails_in_the_warm_up_is_unavailable(fake_cuda, vs_log) -> None:
    fake_cuda.context_fails = "CUDA device 0 cannot start (cudaErrorDevicesUnavailable)"
    assert isinstance(_select("auto"), NumpyBackend)
    with pytest.raises(ValueError, match="cannot start") as raised:
        _select("cuda")
    assert "device='cuda' cannot run here" in str(raised.value)


def test_only_the_process_holding_the_place_compiles_ahead(fake_cuda, monkeypatch, tmp_path):
    monkeypatch.setenv("AVDENOISE_WARMUP", "1")
    monkeypatch.setattr(warmup, "usable_directory", lambda explicit: tmp_path)
    first = _select("cuda")  # cold: this process compiles for the queue
    second = _select("cuda")  # the stamp is there now
    assert (first.ahead, second.ahead) == (1, 0)
