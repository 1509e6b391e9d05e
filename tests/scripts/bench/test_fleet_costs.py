"""bench_fleet.py's GPU-busy samples and its split into fixed and per-frame costs."""

from __future__ import annotations

import sys
import time

import _fleet_gpu
import _fleet_report
import _fleet_split
import pytest


def test_busy_is_the_median_of_the_samples_above_zero() -> None:
    summary = _fleet_gpu.busy_summary([0, 0, 3, 90, 95, 97, 0])
    assert summary == {"samples": 7, "busy_samples": 4, "busy_pct": 92.5}


def test_busy_is_none_with_a_reason_when_the_gpu_never_ran() -> None:
    summary = _fleet_gpu.busy_summary([0, 0])
    assert summary["busy_pct"] is None and summary["reason"] == "no busy sample"


def test_the_busy_sampler_reads_the_lines_its_command_prints() -> None:
    # nvidia-smi -lms prints a number a line until it is stopped; a blank or odd line is skipped.
    script = "import sys, time; print('0\\n85\\n\\n[N/A]\\n95', flush=True); time.sleep(30)"
    sampler = _fleet_gpu.BusySampler([sys.executable, "-c", script])
    with sampler:
        for _ in range(200):
            if len(sampler.samples) == 3:
                break
            time.sleep(0.02)
    assert sampler.samples == [0, 85, 95]
    assert sampler.summary()["busy_pct"] == 90.0


def test_the_busy_sampler_reads_clock_and_power_under_load() -> None:
    # The query's three fields; the idle sample's clock is not in the medians, nor is an N/A.
    script = (
        "import time; print('0, 345, 80.5\\n90, 1500, 650.0\\n95, [N/A], 700.0\\n"
        "97, 1700, [N/A]', flush=True); time.sleep(30)"
    )
    with _fleet_gpu.BusySampler([sys.executable, "-c", script]) as sampler:
        for _ in range(200):
            if len(sampler.samples) == 4:
                break
            time.sleep(0.02)
    summary = sampler.summary()
    assert sampler.samples == [0, 90, 95, 97]
    assert summary["sm_mhz"] == 1600.0 and summary["power_w"] == 675.0


def test_a_busy_line_without_a_share_is_skipped() -> None:
    assert _fleet_gpu.parse_busy_line("[N/A], 1500, 600") is None
    assert _fleet_gpu.parse_busy_line("42") == (42, None, None)


def test_the_busy_sampler_says_why_without_nvidia_smi() -> None:
    with _fleet_gpu.BusySampler(["no-such-nvidia-smi"]) as sampler:
        pass
    assert sampler.summary()["reason"] == "no-such-nvidia-smi not found"


def test_a_run_carries_how_busy_the_gpu_was() -> None:
    from _fleet import WorkerResult

    result = WorkerResult(0, 0, 9, returncode=0, frames_out=10, wall_s=2.0, first_frame_s=0.5)
    busy = _fleet_gpu.busy_summary([90, 94])
    run = _fleet_report.fleet_numbers([result], 2.0, 10, {"max_mib": 1}, busy=busy)
    assert run["gpu_busy_pct"] == 92.0 and run["gpu_busy"] == busy
    assert run["gpu_sm_mhz"] is None  # busy_summary without clocks
    assert _fleet_report.cell([run, run | {"gpu_busy_pct": 96.0}])["gpu_busy_pct"] == 94.0


def _row(case: str, chunk: int, cells: dict, workers: int = 16) -> dict:
    return {"case": case, "label": case, "workers": workers, "chunk": chunk, "cells": cells}


def test_two_chunk_sizes_split_into_fixed_and_per_frame_costs() -> None:
    # Slowest worker: 2 s + 10 ms a frame; CPU of 16 workers: 1.5 s + 5 ms a frame each.
    def cell(chunk: int, busy: float) -> dict:
        wall = 2.0 + chunk * 0.010
        cpu = 16 * (1.5 + chunk * 0.005)
        return {"slowest_worker_s": wall, "cpu_s": cpu, "gpu_busy_pct": busy}

    rows = [
        _row("BM3D r0", 240, {"avdenoise warm": cell(240, 90.0), "source": {"error": "x"}}),
        _row("BM3D r0", 600, {"avdenoise warm": cell(600, 96.0)}),
        _row("NLM", 240, {"avdenoise warm": cell(240, 50.0)}),  # one chunk size: no split
    ]
    (entry,) = _fleet_split.split(rows)
    assert (entry["case"], entry["column"], entry["chunks"]) == (
        "BM3D r0",
        "avdenoise warm",
        [240, 600],
    )
    assert entry["fixed_s"] == pytest.approx(2.0) and entry["frame_ms"] == pytest.approx(10.0)
    assert entry["steady_fps"] == pytest.approx(1600.0)
    assert entry["cpu_fixed_s"] == pytest.approx(1.5) and entry["cpu_frame_ms"] == pytest.approx(
        5.0
    )
    assert entry["gpu_busy_pct"] == 93.0
    table = _fleet_split.markdown([entry])
    assert "| BM3D r0 | avdenoise warm | 240/600 | 2.00 | 10.0 | 1600 | 1.50 | 5.0 | 93 |" in table


def test_no_split_without_two_chunk_sizes() -> None:
    rows = [_row("BM3D r0", 240, {"source": {"slowest_worker_s": 2.0}})]
    assert _fleet_split.split(rows) == [] and _fleet_split.markdown([]) == ""
