"""gpu_memory.py's parts that need no GPU: its case option and its table."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "bench" / "gpu_memory.py"
spec = importlib.util.spec_from_file_location("gpu_memory", SCRIPT)
gpu_memory = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_memory)


def test_case_names_keep_their_commas() -> None:
    assert gpu_memory.split_cases("radius 0, luma,radius 1, YUV444") == [
        "radius 0, luma",
        "radius 1, YUV444",
    ]


def test_a_failed_case_says_why_in_its_row() -> None:
    rows = [
        {"case": "context only", "process_mib": 512.0},
        {"case": "radius 0, luma", "error": "no GPU"},
        {"case": "radius 1, YUV444", "fps": 300.4, "process_mib": 1500.0, "cache_mib": 400.2},
    ]
    lines = gpu_memory.table(rows).splitlines()
    assert lines[2].startswith("| context only | n/a | 512 |")
    assert lines[3].startswith("| radius 0, luma | no GPU | n/a |")
    assert lines[4].startswith("| radius 1, YUV444 | 300 | 1500 | 400 |")


def test_no_gpu_means_no_process_row(monkeypatch) -> None:
    def no_smi(*args, **kwargs):
        raise OSError("nvidia-smi: not found")

    monkeypatch.setattr(gpu_memory.subprocess, "run", no_smi)
    assert gpu_memory.process_mib(1) is None
