"""The command line prints a cache path whatever the output's encoding can hold.

A cache folder named in characters that ``PYTHONIOENCODING=ascii`` (or a C locale without
UTF-8 mode) cannot encode must come out escaped, and one named in bytes that are no text in
the filesystem's encoding as those bytes, never end ``cache list`` or ``doctor`` with a
UnicodeEncodeError.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from avdenoise_vs._warmup import files as _warmup_files

__all__: list[str] = []

KEY = 0x0123456789ABCDEF0123456789ABCDEF

CASES = {
    # name: (folder name, environment, how the name prints, how the stamp's "Niña" prints)
    "ascii": (
        "kaché-キャッシュ".encode(),
        {"PYTHONIOENCODING": "ascii"},
        b"kach\\xe9-\\u30ad\\u30e3\\u30c3\\u30b7\\u30e5",
        b"Ni\\xf1a()",
    ),
    # The filesystem's encoding is ASCII too: the name's bytes are kept as surrogates.
    "c-locale": (
        "kaché".encode(),
        {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""},
        "kaché".encode(),
        b"Ni\\xf1a()",
    ),
    "not-utf-8": (b"cache-\xff", {"PYTHONIOENCODING": "utf-8"}, b"cache-\xff", "Niña()".encode()),
}


@pytest.fixture
def cli(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``cli(case, *args)``: run ``python -m avdenoise_vs ARGS`` in the environment of `case`
    with CUPY_CACHE_DIR a folder of its name that holds one stamp; output as bytes."""

    def run(case: str, *args: str) -> subprocess.CompletedProcess[bytes]:
        name, environment, _, _ = CASES[case]
        folder = os.path.join(os.fsencode(tmp_path), name)
        os.makedirs(folder, exist_ok=True)
        stamp = Path(os.fsdecode(folder)) / f"warm-{KEY:032x}.stamp"
        assert _warmup_files.write_stamp(stamp, KEY, ("spec Niña()",))
        monkeypatch.setenv("CUPY_CACHE_DIR", os.fsdecode(folder))
        monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
        for variable, value in environment.items():
            monkeypatch.setenv(variable, value)
        return run_cli(*args, text=False)

    return run


@pytest.mark.parametrize("case", list(CASES))
def test_cache_list_and_clear_print_any_path(cli, tmp_path: Path, case: str) -> None:
    _, _, printed, spec = CASES[case]
    for command in (("cache", "list"), ("cache", "clear")):
        done = cli(case, *command)
        assert done.returncode == 0, done.stderr
        assert b"Traceback" not in done.stderr
        assert os.fsencode(tmp_path) + b"/" + printed in done.stdout
    assert spec in cli(case, "cache", "list").stdout


def test_doctor_prints_any_path(cli, tmp_path: Path) -> None:
    printed = CASES["ascii"][2]
    done = cli("ascii", "doctor")
    assert done.returncode in (0, 1), done.stderr
    assert b"Traceback" not in done.stderr
    directory = os.fsencode(tmp_path) + b"/" + printed
    assert b"cache directory: " + directory + b" (from the environment" in done.stdout
    assert b"What to fix" in done.stdout or b"Nothing to fix." in done.stdout
