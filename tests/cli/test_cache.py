"""``python -m avdenoise_vs cache list|clear`` on a folder of fake stamps, locks and kernels.

Only our files and CuPy's are ever deleted: an unrelated file, a subfolder's content, a link
and what it points to must all survive ``clear --yes``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from avdenoise_vs._cli import main
from avdenoise_vs._warmup import files as _warmup_files

__all__: list[str] = []

KEY = "0123456789abcdef0123456789abcdef"
OLD_KEY = "fedcba9876543210fedcba9876543210"
SHA1 = "3f786850e387550fdab836ed7e6dc881de23001b"
SPEC = "spec NlmSpec(search_radius=2, radius=1, distance=<Distance.LUMA: 'luma'>)"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A cache directory with two stamps (one of the old one-line kind), a lock, an orphaned
    stamp temporary, CuPy's files and things that are neither."""
    cache = tmp_path / "kernel_cache"
    cache.mkdir()
    assert _warmup_files.write_stamp(
        cache / f"warm-{KEY}.stamp", int(KEY, 16), ("env cupy=14.1.0;nvrtc=13.0;sm=90", SPEC)
    )
    (cache / f"warm-{OLD_KEY}.stamp").write_text(f"{OLD_KEY} avdenoise_vs 0.0.9 pid 7\n")
    (cache / f"warm-{KEY}.lock").touch()
    (cache / f"warm-{KEY}.stamp.123.0badcafe.tmp").touch()
    (cache / f"{SHA1}.cubin").write_bytes(b"x" * 2048)
    (cache / f"{SHA1[:32]}.cubin").write_bytes(b"x" * 100)  # an old CuPy's MD5 name
    (cache / f"{SHA1}.cubin.cu").write_text('extern "C" __global__ void k() {}')
    (cache / "notes.txt").write_text("mine")
    (cache / "tmpab12cd_e").write_text("someone's temporary file")
    (cache / "sub").mkdir()
    (cache / "sub" / f"{SHA1}.cubin").write_text("not at the top level")
    outside = tmp_path / "outside.cubin"
    outside.write_text("elsewhere")
    (cache / f"{'a' * 40}.cubin").symlink_to(outside)
    return cache


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["cache", *args])
    return code, capsys.readouterr().out


def _names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def test_list_shows_each_stamp_and_cupys_kernels(folder: Path, capsys) -> None:
    code, out = _run(capsys, "list", "--dir", str(folder))
    assert code == 0
    assert f"cache directory: {folder} (from --dir)" in out
    assert "CuPy's cached kernels: 3 files, 2.1 KiB" in out
    assert "warm-up stamps: 2, newest" in out and "lock files: 1" in out
    assert f"{KEY}  " in out and "avdenoise_vs 0.1.0" in out
    assert "compiled for cupy=14.1.0;nvrtc=13.0;sm=90" in out
    assert "NlmSpec(search_radius=2, radius=1, distance=LUMA)" in out
    assert f"{OLD_KEY}  " in out and "(its text does not say what it is for)" in out
    assert "other entries, never touched: 4" in out


def test_list_as_json(folder: Path, capsys) -> None:
    code, out = _run(capsys, "list", "--dir", str(folder), "--json")
    listing = json.loads(out)
    assert code == 0
    kernels = [f"{SHA1}.cubin", f"{SHA1[:32]}.cubin", f"{SHA1}.cubin.cu"]
    assert listing["kernel_files"] == 3
    assert listing["kernel_bytes"] == sum((folder / name).stat().st_size for name in kernels)
    assert {s["key"] for s in listing["stamps"]} == {KEY, OLD_KEY}
    (new,) = [s for s in listing["stamps"] if s["key"] == KEY]
    assert new["specs"] == [SPEC.removeprefix("spec ")] and new["pid"] == os.getpid()
    assert listing["locks"] == [f"warm-{KEY}.lock"]


def test_list_follows_cupy_cache_dir(folder: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUPY_CACHE_DIR", str(folder))
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    code, out = _run(capsys, "list")
    assert code == 0
    assert f"cache directory: {folder} (from the environment, CUPY_CACHE_DIR)" in out


def test_clear_without_yes_deletes_nothing(folder: Path, capsys) -> None:
    before = _names(folder)
    code, out = _run(capsys, "clear", "--dir", str(folder))
    assert code == 0
    assert _names(folder) == before
    assert f"would delete from {folder}:" in out
    assert f"  warm-{KEY}.lock" in out and "3 of CuPy's cached kernel files" in out
    assert "run again with --yes" in out


def test_clear_stamps_only_keeps_cupys_kernels(folder: Path, capsys) -> None:
    code, out = _run(capsys, "clear", "--dir", str(folder), "--stamps-only", "--yes")
    assert code == 0, out
    assert not list(folder.glob("warm-*"))
    assert {f"{SHA1}.cubin", f"{SHA1[:32]}.cubin", f"{SHA1}.cubin.cu"} <= _names(folder)
    assert "2 stamps, 1 stamp temporary, 1 lock file" in out


def test_clear_yes_deletes_only_ours_and_cupys(folder: Path, tmp_path: Path, capsys) -> None:
    code, out = _run(capsys, "clear", "--dir", str(folder), "--yes", "--json")
    report = json.loads(out)
    assert code == 0 and report["failed"] == []
    assert _names(folder) == {"notes.txt", "tmpab12cd_e", "sub", f"{'a' * 40}.cubin"}
    assert (folder / "sub" / f"{SHA1}.cubin").is_file()
    assert (tmp_path / "outside.cubin").read_text() == "elsewhere"


def test_a_held_lock_is_kept(folder: Path, capsys) -> None:
    lock = _warmup_files.new_lock(folder / f"warm-{KEY}.lock")
    lock.acquire(timeout=0)
    try:
        code, out = _run(capsys, "clear", "--dir", str(folder), "--yes")
    finally:
        lock.release(force=True)
    assert code == 0
    assert f"kept warm-{KEY}.lock: another process holds it" in out
    assert (folder / f"warm-{KEY}.lock").exists()


def test_a_missing_directory(tmp_path: Path, capsys) -> None:
    code, out = _run(capsys, "list", "--dir", str(tmp_path / "nowhere"))
    assert code == 0
    assert "does not exist yet" in out
    code, out = _run(capsys, "clear", "--dir", str(tmp_path / "nowhere"), "--yes")
    assert code == 0 and "nothing" in out


def test_in_memory_cache_has_no_directory(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUPY_CACHE_IN_MEMORY", "1")
    code, out = _run(capsys, "list")
    assert code == 0 and "CUPY_CACHE_IN_MEMORY=1" in out


def test_an_empty_cupy_cache_dir_is_not_the_working_folder(
    run_cli, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CuPy cannot make the folder '' (it fails at import); ``Path("")`` would be ``.``."""
    monkeypatch.setenv("CUPY_CACHE_DIR", "")
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    before = _names(folder)
    listed = run_cli("cache", "list", cwd=folder)
    assert listed.returncode == 1, listed.stdout + listed.stderr
    assert "CUPY_CACHE_DIR is set but empty, which names no folder" in listed.stdout
    assert "unset CUPY_CACHE_DIR (CuPy then uses ~/.cupy/kernel_cache)" in listed.stdout
    cleared = run_cli("cache", "clear", "--yes", "--json", cwd=folder)
    assert cleared.returncode == 1 and json.loads(cleared.stdout)["directory"] is None
    assert _names(folder) == before


def test_an_empty_dir_option_is_refused(folder: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(folder)
    before = _names(folder)
    with pytest.raises(SystemExit) as exit_:
        main(["cache", "clear", "--dir", "", "--yes"])
    assert exit_.value.code == 2
    assert "--dir: must name a folder, got ''" in capsys.readouterr().err
    assert _names(folder) == before


def test_clear_refuses_a_folder_that_is_no_kernel_cache(tmp_path: Path, capsys) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("mine")
    (work / "sub").mkdir()
    code, out = _run(capsys, "clear", "--dir", str(work), "--yes")
    assert code == 1
    assert f"{work} does not look like a CuPy kernel cache" in out and "nothing was deleted" in out
    assert _names(work) == {"notes.txt", "sub"}
    code, out = _run(capsys, "clear", "--dir", str(tmp_path / "nowhere"), "--yes")
    assert code == 0 and "nothing" in out  # a cache not made yet: nothing to refuse
