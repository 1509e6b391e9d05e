"""scripts/bench/material_table.py: a tiny run measures every material, and its summaries."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "bench" / "material_table.py"


@pytest.fixture(scope="module")
def table():
    """The script as a module (it lives outside the folders on sys.path)."""
    pytest.importorskip("vapoursynth")
    spec = importlib.util.spec_from_file_location("material_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_a_tiny_run_writes_every_material_picture_and_config(tmp_path: Path, table) -> None:
    pytest.importorskip("skimage")
    pytest.importorskip("PIL")
    out = tmp_path / "materials.json"
    command = [sys.executable, str(SCRIPT), "--size", "32", "--quick", "--json", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    materials = document["materials"]
    assert list(materials) == ["grain", "compression", "dark", "anime"]
    for pictures in materials.values():
        assert list(pictures) == list(table.PICTURES)
        for result in pictures.values():
            assert [r["config"] for r in result["runs"]] == list(table.CONFIGS)
            assert all(math.isfinite(r["psnr"]) and 0 < r["ssim"] <= 1 for r in result["runs"])
    # Grain of deviation 3 to 8 codes: each denoiser at its default strength removes some, and
    # V-BM3D's two frames each side remove more than spatial BM3D.
    gains = {
        config: gain["psnr"] for (config, _), gain in table.mean_gains(materials["grain"]).items()
    }
    assert all(gain > 0 for gain in gains.values()), gains
    assert gains["V-BM3D r2"] > gains["BM3D r0"] + 0.5, gains
    assert "Each configuration at its best strength" in done.stdout


def test_the_materials_damage_the_picture_as_described(table) -> None:
    pytest.importorskip("skimage")
    import numpy as np
    from skimage import data

    picture = table.centre_pan(data.astronaut(), 64)
    deviations = {}
    for name, make in table.MATERIALS.items():
        clean, damaged = make(picture, 64, np.random.default_rng(7))
        assert len(clean) == len(damaged) == table.LENGTH
        assert clean[0].shape == damaged[0].shape == (64, 64)
        deviations[name] = float((damaged[2].astype(float) - clean[2]).std())
    assert 2.0 < deviations["grain"] < 9.0
    assert 2.0 < deviations["dark"] < 6.5
    assert 4.0 < deviations["anime"] < 6.0
    assert deviations["compression"] > 1.0
    dark_clean, _ = table.dark(picture, 64, np.random.default_rng(7))
    assert 16 <= dark_clean[2].min() and dark_clean[2].max() <= 80


def test_the_summary_picks_each_configs_best_mean_gain(table) -> None:
    def run(config: str, strength: float, psnr: float) -> dict:
        return {"config": config, "strength": strength, "psnr": psnr}

    result = {
        "a": {"input": {"psnr": 30.0}, "runs": [run("NLM", 3, 31.0), run("NLM", 6, 33.0)]},
        "b": {"input": {"psnr": 20.0}, "runs": [run("NLM", 3, 24.0), run("NLM", 6, 22.0)]},
    }
    gains = table.mean_gains(result)
    assert gains == {("NLM", 3): {"psnr": 2.5}, ("NLM", 6): {"psnr": 2.5}}
    result["b"]["runs"][1]["psnr"] = 22.5
    assert table.best_strengths(table.mean_gains(result)) == {"NLM": (6, {"psnr": 2.75})}


def test_a_crop_too_large_for_the_picture_is_an_error(table) -> None:
    import numpy as np

    with pytest.raises(ValueError, match="size must leave room for the pan"):
        table.centre_pan(np.zeros((40, 40)), 32)


@pytest.mark.parametrize("option", ["--materials", "--configs"])
def test_an_unknown_name_is_a_usage_error(option: str) -> None:
    pytest.importorskip("vapoursynth")
    command = [sys.executable, str(SCRIPT), option, "grain,nothing"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"{option} must be names from" in done.stderr
    assert "got 'grain,nothing'" in done.stderr


def test_help_names_the_materials() -> None:
    pytest.importorskip("vapoursynth")
    done = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: material_table.py")
    assert "compression: each frame a JPEG of quality 10" in done.stdout
