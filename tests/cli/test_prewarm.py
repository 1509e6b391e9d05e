"""``python -m avdenoise_vs prewarm``: on the CPU (nothing to compile) and on a fake CUDA
backend, whose compile is recorded and stamped by the real warm-up queue."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from avdenoise_vs._backends.cuda import backend as cuda_backend
from avdenoise_vs._backends.reference import NumpyBackend
from avdenoise_vs._cli import main
from avdenoise_vs._warmup import cache as _warmup_cache

vs = pytest.importorskip("vapoursynth")

__all__: list[str] = []

SCRIPT = """
import vapoursynth as vs
core = vs.core
assert __name__ == "__vapoursynth__", __name__
clip = core.std.BlankClip(width=int(width), height=24, format=vs.GRAY8, length=4)
core.avdenoise.Denoise(clip, radius=1, device=DEVICE).set_output()
"""


def _script(tmp_path: Path, device: str = "cpu") -> Path:
    path = tmp_path / "denoise.vpy"
    path.write_text(SCRIPT.replace("DEVICE", repr(device)))
    return path


def _prewarm(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    """Run ``prewarm ARGS --json`` in this process; return its exit status and report."""
    code = main(["prewarm", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_cpu_script_needs_no_compiling(
    tmp_path: Path, core, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["prewarm", str(_script(tmp_path)), "-a", "width=32"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "nothing needed compiling: 1 avdenoise filter (cpu 1), all on the CPU backend" in out
    assert vs.get_outputs() == {}, "prewarm leaves no outputs behind"


def test_a_cpu_script_as_json(tmp_path: Path, core, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = _prewarm(capsys, str(_script(tmp_path)), "-a", "width=32")
    assert code == 0
    assert report["backends"] == {"cpu": 1} and report["kernels"] == []
    assert report["outputs"] == 1 and report["ok"] is True


def test_the_script_runs_in_its_own_folder_with_its_arguments(
    tmp_path: Path, core, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "width.txt").write_text("40")
    script = tmp_path / "relative.vpy"
    script.write_text(
        "import vapoursynth as vs, pathlib\n"
        "assert pathlib.Path(__file__).is_absolute()\n"
        "w = int(open('width.txt').read()) + int(extra)\n"
        "clip = vs.core.std.BlankClip(width=w, height=24, format=vs.GRAY8, length=2)\n"
        "vs.core.avdenoise.Denoise(clip, device='cpu').set_output()\n"
    )
    code, report = _prewarm(capsys, str(script), "-a", "extra=8")
    assert code == 0, report["error"]


def test_a_script_error_is_reported_with_exit_1(
    tmp_path: Path, core, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["prewarm", str(_script(tmp_path))])  # no -a width=...
    out = capsys.readouterr().out
    assert code == 1
    assert "NameError: name 'width' is not defined" in out
    assert "_cli" not in out, "the traceback shows the script's frames only"


def test_one_denoise_on_a_blank_clip(core, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--algorithm", "bm3d", "--format", "yuv444ps", "--width", "32", "--height", "24"]
    code, report = _prewarm(capsys, *args, "--radius", "1", "--channels", "yuv", "--device", "cpu")
    assert code == 0, report["error"]
    assert report["backends"] == {"cpu": 1}


def test_a_rejected_setting_is_the_filters_message(
    core, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _prewarm(capsys, "--algorithm", "nlm", "--radius", "99", "--device", "cpu")
    assert code == 1
    assert report["error"] == "avdenoise.Denoise: radius must be an integer from 0 to 8, got 99"


def test_without_a_script_the_algorithm_is_denoises_default(
    core, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _prewarm(capsys, "--format", "GRAY8", "--width", "32", "--device", "cpu")
    assert code == 0, report["error"]
    assert report["backends"] == {"cpu": 1} and report["outputs"] == 1


def test_a_script_gives_the_algorithm_and_settings(
    fake_cuda: type[_FakeCuda], cache: Path, tmp_path: Path, core, capsys
) -> None:
    script = tmp_path / "bm3d.vpy"
    script.write_text(
        SCRIPT.replace("radius=1, device=DEVICE", "algorithm='bm3d', radius=2, device='cuda'")
    )
    code, report = _prewarm(capsys, str(script), "-a", "width=32")
    assert code == 0, report
    (kernel,) = report["kernels"]
    assert kernel["outcome"] == "compiled"
    assert "('fake-spec', 'bm3d', 2, <Distance.LUMA: 'luma'>)" in Path(kernel["stamp"]).read_text()


@pytest.mark.parametrize(
    ("name", "words"), [("missing.vpy", "no such script"), (".", "not a file")]
)
def test_a_script_that_cannot_be_read_is_one_line_and_exit_2(
    tmp_path: Path, core, capsys: pytest.CaptureFixture[str], name: str, words: str
) -> None:
    path = tmp_path / name
    assert main(["prewarm", str(path), "-a", "width=32"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"python -m avdenoise_vs prewarm: error: {words}: {path}\n"


def test_a_script_with_denoise_options_names_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["prewarm", str(_script(tmp_path)), "--radius", "2", "--format", "GRAY8"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "with a script, its filters give the settings: --format, --radius are for" in err


USAGE_ERRORS = [
    [],
    ["x.vpy", "--algorithm", "nlm"],
    ["--algorithm", "nlm", "-a", "k=v"],
    ["--algorithm", "nlm", "--format", "NOPE"],
    ["x.vpy", "-a", "no-equals"],
]


@pytest.mark.parametrize("args", USAGE_ERRORS)
def test_usage_errors_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["prewarm", *args])
    assert exit_info.value.code == 2


class _FakeCuda:
    """A CUDA backend whose 'compile' is counted (or fails); frames are the NumPy backend's."""

    name = "cuda"
    gpu_frames = None
    compiles = 0
    fail = False

    def __init__(self, passes, layout, device_index=None, vulkan_uuid=None) -> None:
        self.device_id = device_index or 0
        self.passes = passes
        self._frames = NumpyBackend(passes, layout)

    def kernel_specs(self) -> tuple:
        return tuple(("fake-spec", p.algorithm.value, p.radius, p.distance) for p in self.passes)

    def compile_ahead(self) -> None:
        """Nothing to start: `warm_up` is the whole compile."""

    def warm_up(self) -> None:
        type(self).compiles += 1
        if self.fail:
            raise RuntimeError("fake NVRTC failure")

    def prepare_threads(self, threads: int) -> None:
        """The real backend makes the threads' states here; the fake has none to make."""

    def process(self, n, frame_numbers, windows, dst) -> None:
        self._frames.process(n, frame_numbers, windows, dst)

    def bridge_process(self, n, frame_numbers, windows, dst) -> None:
        """Frames leave no host step to the bridge, as the NumPy backend's."""
        self.process(n, frame_numbers, windows, dst)


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch, cache: Path) -> type[_FakeCuda]:
    """A fake CUDA backend, with the real queue on, in the cold cache directory `cache`."""
    fake = type("FakeCuda", (_FakeCuda,), {"compiles": 0, "fail": False})
    monkeypatch.setattr(cuda_backend, "CudaBackend", fake)
    # The queue needs CuPy unless given a directory; the filters give none, so stand in for
    # an installed CuPy whose cache is `cache`.
    monkeypatch.setattr(_warmup_cache, "cupy_installed", lambda: True)
    monkeypatch.setattr(_warmup_cache, "cache_dir", lambda: cache)
    return fake


def test_a_compile_is_recorded_and_stamped_then_found_warm(
    fake_cuda: type[_FakeCuda], cache: Path, tmp_path: Path, core, capsys
) -> None:
    script = str(_script(tmp_path, device="cuda"))
    code, first = _prewarm(capsys, script, "-a", "width=32")
    assert code == 0, first
    assert first["backends"] == {"cuda": 1}
    (kernel,) = first["kernels"]
    assert kernel["outcome"] == "compiled" and fake_cuda.compiles == 1
    stamp = cache / f"warm-{kernel['key']}.stamp"
    assert kernel["stamp"] == str(stamp) and stamp.is_file()
    assert "spec ('fake-spec', 'nlm', 1, <Distance.LUMA: 'luma'>)" in stamp.read_text()

    code, second = _prewarm(capsys, script, "-a", "width=64")
    assert code == 0
    assert [(k["key"], k["outcome"]) for k in second["kernels"]] == [(kernel["key"], "warm")]
    assert fake_cuda.compiles == 2, "a warm cache is still loaded, under no lock"

    main(["prewarm", script, "-a", "width=32"])
    out = capsys.readouterr().out
    assert f"{kernel['key']}  already warm (stamp found)" in out
    assert "('fake-spec', 'nlm', 1, LUMA)" in out


def test_a_failed_compile_leaves_no_stamp_and_exits_1(
    fake_cuda: type[_FakeCuda], cache: Path, tmp_path: Path, core, capsys
) -> None:
    fake_cuda.fail = True
    code = main(["prewarm", str(_script(tmp_path, device="cuda")), "-a", "width=32"])
    out = capsys.readouterr().out
    assert code == 1
    assert "NO stamp: the compile failed" in out
    assert list(cache.glob("*.stamp")) == []


def test_a_queue_switched_off_says_so(
    fake_cuda: type[_FakeCuda], tmp_path: Path, core, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AVDENOISE_WARMUP", "0")
    code, report = _prewarm(capsys, str(_script(tmp_path, device="cuda")), "-a", "width=32")
    assert code == 0
    assert [k["outcome"] for k in report["kernels"]] == ["unqueued"]
