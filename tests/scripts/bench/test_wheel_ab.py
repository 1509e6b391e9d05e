"""scripts/bench/wheel_ab.sh takes two builds in turn in one site and gives the first back.

The site and the wheel are stand-ins: a package whose one file names its build, and the
command prints the live one, so each run shows which build it ran on."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "bench" / "wheel_ab.sh"


def _site(path: Path, build: str) -> Path:
    """A site with our package and plugin folder, each holding a file that names `build`."""
    for part in ("avdenoise_vs", "vapoursynth/plugins/avdenoise", "vapoursynth/plugins/other"):
        (path / part).mkdir(parents=True, exist_ok=True)
    (path / "avdenoise_vs" / "build.txt").write_text(build)
    (path / "vapoursynth" / "plugins" / "avdenoise" / "build.txt").write_text(build)
    (path / "vapoursynth" / "plugins" / "other" / "rival.txt").write_text("rival")
    return path


def _wheel(folder: Path, build: str) -> Path:
    """A wheel of the same two folders, naming `build`."""
    wheel = folder / "avdenoise_vs-0.0.1-py3-none-any.whl"
    info = "avdenoise_vs-0.0.1.dist-info"
    files = {
        "avdenoise_vs/build.txt": build,
        "vapoursynth/plugins/avdenoise/build.txt": build,
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: avdenoise_vs\nVersion: 0.0.1\n",
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr(
            f"{info}/RECORD", "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
        )
    return wheel


def _run(site: Path, wheel: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHON=sys.executable)
    command = ["bash", str(SCRIPT), str(site), str(wheel), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def test_the_builds_take_turns_and_the_site_gets_its_own_back(tmp_path: Path) -> None:
    site = _site(tmp_path / "site", "A")
    wheel = _wheel(tmp_path, "B")
    shown = "cat {site}/avdenoise_vs/build.txt {site}/vapoursynth/plugins/avdenoise/build.txt"
    done = _run(site, wheel, "2", "--", "sh", "-c",
                shown.format(site=site) + "; echo ' run {build}{round}'")  # fmt: skip
    assert done.returncode == 0, done.stderr
    runs = [line for line in done.stdout.splitlines() if "run" in line]
    assert runs == ["AA run A1", "BB run B1", "AA run A2", "BB run B2"]
    assert (site / "avdenoise_vs" / "build.txt").read_text() == "A"
    assert (site / "vapoursynth" / "plugins" / "avdenoise" / "build.txt").read_text() == "A"
    assert (site / "vapoursynth" / "plugins" / "other" / "rival.txt").read_text() == "rival"


def test_a_failing_command_still_gives_the_site_back(tmp_path: Path) -> None:
    site = _site(tmp_path / "site", "A")
    done = _run(site, _wheel(tmp_path, "B"), "1", "--", "sh", "-c", "test {build} = A")
    assert (site / "avdenoise_vs" / "build.txt").read_text() == "A"
    assert "## build B, round 1" in done.stdout


def test_the_command_must_follow_a_double_dash(tmp_path: Path) -> None:
    site = _site(tmp_path / "site", "A")
    done = _run(site, _wheel(tmp_path, "B"), "sh")
    assert done.returncode == 2
    assert "COMMAND must follow --" in done.stderr
