"""scripts/bench/vsjetpack_bench.py: a whole CPU run on a tiny clip, as the GPU run will go."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "vsjetpack_bench.py"


@pytest.mark.slow
def test_a_cpu_run_reports_every_case(tmp_path: Path) -> None:
    vapoursynth = pytest.importorskip("vapoursynth")
    pytest.importorskip("vsdenoise", reason="vsjetpack is not installed")
    out = tmp_path / "vsjetpack.json"
    command = [
        sys.executable, str(SCRIPT), "--device", "cpu", "--width", "64", "--height", "48",
        "--frames", "3", "--json", str(out),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    assert document["settings"]["device"] == "cpu" and document["frames"] == 3
    rows = {(row["case"], row["backend"]): row for row in document["rows"]}
    cases = ["nlm-yuv420", "nlm-chroma", "bm3d-fast-yuv420", "bm3d-np-yuv444"]
    assert list(rows) == [(case, backend) for case in cases for backend in ("avdenoise", "vszipcu")]
    for case in cases:
        ours = rows[case, "avdenoise"]
        assert "error" not in ours, ours
        assert ours["fps"] > 0
        assert ours["psnr"] > ours["noisy_psnr"] + 2  # it denoised: the strengths fit the noise
        assert f"{case:<18}avdenoise" in done.stdout
    # Without vszipcu (CI) its cells say so instead of stopping the run.
    if not hasattr(vapoursynth.core, "vszipcu"):
        want = "RuntimeError: vszipcu is not installed"
        assert all(rows[case, "vszipcu"]["error"] == want for case in cases)


def test_unknown_case_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--cases", "nlm-yuv420,bm3d"], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "unknown cases ['bm3d']" in done.stderr
