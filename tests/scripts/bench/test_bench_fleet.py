"""scripts/bench/bench_fleet.py: its pure parts, the launcher's timeout, a whole run on the CPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import _fleet
import _fleet_cases
import _fleet_gpu
import _fleet_report
import pytest
from _fleet import WorkerResult

BENCH = Path(__file__).resolve().parents[3] / "scripts" / "bench"
FLEET_TIMEOUT_S = 120
"""Longest the end-to-end run may take on a 2-core CI machine before the test fails."""

NVIDIA_SMI_SAMPLE = """\
41021, 1734
41022, 1698
41023, [N/A]
9, 0
41021, 12
"""
"""``nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits``, as an
H200 prints it for three workers (one without a number), a process with no memory, and a
pid listed on a second GPU."""


# --- chunks -------------------------------------------------------------------------------


@pytest.mark.parametrize(("workers", "chunk"), [(16, 240), (1, 600), (3, 5)])
def test_a_fleet_gets_one_contiguous_chunk_a_worker(workers: int, chunk: int) -> None:
    chunks = _fleet.split_frames(0, workers * chunk, workers)
    assert chunks == [(i * chunk, (i + 1) * chunk) for i in range(workers)]


def test_selecting_cases_by_substring() -> None:
    assert _fleet_cases.select(None) == list(_fleet_cases.CASES)
    assert _fleet_cases.select("v-bm3d r1, python") == [
        "V-BM3D r1 YUV444",
        "chain V-BM3D r1 luma + NLM UV",
        "NLM Y d1 a2 s4 + Python ModifyFrame",
    ]
    assert _fleet_cases.select("nothing like it") == []


def test_float_cases_pipe_raw_frames() -> None:
    assert _fleet_cases.CASES["NLM Y d1 a2 s4"].y4m
    assert not _fleet_cases.CASES["BM3D r0 luma"].y4m


# --- GPU memory ---------------------------------------------------------------------------


def test_parsing_an_nvidia_smi_sample() -> None:
    usage = _fleet_gpu.parse_compute_apps(NVIDIA_SMI_SAMPLE)
    assert usage == {41021: 1746, 41022: 1698, 9: 0}


def test_memory_per_worker_by_pid() -> None:
    summary = _fleet_gpu.memory_summary(
        {41021: 1746, 41022: 1698}, 3444, 40, [41021, 41022, 7], None
    )
    assert summary["method"] == "pid"
    assert summary["per_worker_mib"] == [1746, 1698, None]
    assert (summary["max_mib"], summary["mean_mib"]) == (1746, 1722.0)


def test_memory_falls_back_to_the_total_when_no_pid_matches() -> None:
    # nvidia-smi in a container that does not share the host's pid namespace.
    summary = _fleet_gpu.memory_summary({555: 3000}, 3000, 12, [1, 2], None)
    assert (summary["method"], summary["max_mib"]) == ("total", 1500.0)


def test_memory_is_na_with_a_reason_without_nvidia_smi() -> None:
    sampler = _fleet_gpu.GpuSampler(command=["no-such-nvidia-smi", "-q"])
    with sampler:
        pass
    summary = sampler.summary([1, 2])
    assert summary["max_mib"] is None and summary["reason"] == "no-such-nvidia-smi not found"


# --- fleet numbers and the table ----------------------------------------------------------


def _result(index: int, **fields: object) -> WorkerResult:
    """A worker that wrote its 10 frames in 2 s, first frame at 0.5 s, unless told otherwise."""
    values = dict(returncode=0, frames_out=10, wall_s=2.0, first_frame_s=0.5) | fields
    return WorkerResult(index, 10 * index, 10 * index + 9, **values)  # type: ignore[arg-type]


MEMORY = {"method": "pid", "max_mib": 700, "mean_mib": 650.0}


def test_fleet_numbers_of_a_good_run() -> None:
    results = [_result(0), _result(1, wall_s=2.4, first_frame_s=0.7)]
    run = _fleet_report.fleet_numbers(results, 2.5, 20, MEMORY)
    assert (run["frames"], run["fps"], run["slowest_worker_s"]) == (20, 8.0, 2.4)
    assert (run["mean_first_frame_s"], run["gpu_mib"]) == (0.6, 700)
    assert "error" not in run


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        (dict(timed_out=True, returncode=-9), "timed out after 30 s (1 of 2 workers running)"),
        (
            dict(returncode=1, stderr_tail="Traceback\nAttributeError: no knlm\nOutput 0 frames"),
            "1 of 2 workers failed: AttributeError: no knlm",
        ),
        (dict(frames_out=9), "19 frames written, 20 expected"),
    ],
)
def test_a_run_that_does_not_count_says_why(fields: dict, reason: str) -> None:
    results = [_result(0), _result(1, **fields)]
    assert _fleet_report.fleet_numbers(results, 2.5, 20, MEMORY, 30)["error"] == reason


def _cell(fps: float, **fields: object) -> dict:
    """A cell of one run at `fps`."""
    run = dict(fps=fps, wall_s=1.0, slowest_worker_s=1.0, mean_first_frame_s=0.5, gpu_mib=600)
    run |= dict(gpu={"method": "pid"}) | fields
    return _fleet_report.cell([run])


def test_a_cell_is_the_median_of_its_runs() -> None:
    runs = [dict(fps=f, wall_s=1.0, gpu={"method": "pid"}, gpu_mib=None) for f in (90, 100, 300)]
    found = _fleet_report.cell(runs)
    assert found["fps"] == 100 and found["gpu_mib"] is None and len(found["runs"]) == 3
    assert _fleet_report.cell([*runs, {"error": "boom"}])["error"] == "boom"


def test_the_table_compares_ours_warm_with_the_best_rival() -> None:
    cells = {
        "avdenoise cold": _cell(2000.0, mean_first_frame_s=1.6),
        "avdenoise warm": _cell(2600.0, slowest_worker_s=1.5, mean_first_frame_s=0.7),
        "vszipcu": _cell(650.0, slowest_worker_s=6.0, gpu_mib=1700),
        "knlm": _cell(240.0),
        "nlm_cuda": {"error": "16 of 16 workers failed: AttributeError: no nlm_cuda"},
    }
    rows = [
        {"label": "NLM Y d1 a2 s4", "cells": cells},
        {"label": "BM3D r0 luma", "cells": {"avdenoise warm": _cell(2100.0)}},
    ]
    columns = ["avdenoise cold", "avdenoise warm", "vszipcu", "knlm", "nlm_cuda"]
    lines = _fleet_report.markdown(rows, columns, "### header").splitlines()
    assert lines[0] == "### header"
    assert lines[2].startswith("| case | avdenoise cold | avdenoise warm | vszipcu |")
    assert lines[4] == (
        "| NLM Y d1 a2 s4 | 2000 | 2600 | 650 | 240 | n/a | 4.00x | 1.50/6.00 "
        "| 1.60/0.70/0.50 | 600/1700 |"
    )
    # Columns a case has no cell for read "-", as do the comparisons without a rival.
    assert lines[5] == "| BM3D r0 luma | - | 2100 | - | - | - | - | 1.00/- | -/0.50/- | 600/- |"
    assert lines[-1] == (
        "- n/a NLM Y d1 a2 s4 / nlm_cuda: 16 of 16 workers failed: AttributeError: no nlm_cuda"
    )


def test_the_ceilings_are_never_the_best_rival() -> None:
    cells = {
        "avdenoise warm": _cell(300.0),
        "source": _cell(600.0),
        "bus": _cell(450.0),
        "vsfeel": _cell(200.0),
    }
    columns = ["avdenoise warm", "source", "bus", "vsfeel"]
    rows = [{"label": "BM3D r0 YUV444", "cells": cells}]
    line = _fleet_report.markdown(rows, columns, "### header").splitlines()[4]
    assert line.startswith("| BM3D r0 YUV444 | 300 | 600 | 450 | 200 | 1.50x |")


def test_memory_estimated_from_the_total_is_marked() -> None:
    cells = {"avdenoise warm": _cell(100.0, gpu={"method": "total"}), "knlm": _cell(50.0)}
    line = _fleet_report.markdown([{"label": "c", "cells": cells}], ["knlm"], "#").splitlines()[-1]
    assert line.endswith("| ~600/600 |")


# --- the launcher -------------------------------------------------------------------------


def test_a_fleet_past_its_timeout_is_killed_with_its_process_groups(tmp_path: Path) -> None:
    # The worker's shell starts a child of its own, as a wrapper vspipe does; both must go.
    command = ["sh", "-c", "sleep 60 & echo $! > child.pid; wait"]
    workers = [_fleet.Worker(WorkerResult(i, 0, 0), command, None) for i in range(2)]
    envs = [dict(os.environ)] * 2
    started = time.monotonic()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        wall_s = _fleet.launch(workers, envs, tmp_path, timeout=1.0)
    finally:
        os.chdir(cwd)
    assert wall_s < 1.0 + _fleet.KILL_GRACE_S and time.monotonic() - started < 10
    assert all(w.result.timed_out and w.result.returncode == -9 for w in workers)
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the worker's child outlived the kill"


def _alive(pid: int) -> bool:
    """Whether `pid` is a live process (not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


# --- a whole run, ours on the CPU ---------------------------------------------------------


@pytest.fixture(scope="module")
def vspipe() -> str:
    """vspipe, where the plugin autoloads (as tests/test_vspipe.py needs it)."""
    from avdenoise_vs._plugin.devload import plugin_installed

    if not plugin_installed():
        pytest.skip("the plugin is not installed where VapourSynth autoloads (editable install?)")
    found = _fleet.find_vspipe(None)
    if shutil.which(found) is None:
        pytest.skip("vspipe not found")
    return found


@pytest.mark.slow
@pytest.mark.timeout(FLEET_TIMEOUT_S)
def test_a_tiny_fleet_end_to_end_on_the_cpu(vspipe: str, tmp_path: Path) -> None:
    out_json, out_md = tmp_path / "fleet.json", tmp_path / "fleet.md"
    command = [
        sys.executable, str(BENCH / "bench_fleet.py"), "--width", "64", "--height", "48",
        "--workers", "2", "--chunk", "4", "--device", "cpu", "--cases", "NLM Y d1,BM3D r0 luma",
        "--plugins", "source,avdenoise,bm3dcuda,nlm_cuda", "--timeout", "60",
        "--json", str(out_json), "--markdown", str(out_md),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "BM3DCUDA_PLUGIN"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=FLEET_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    document = json.loads(out_json.read_text())
    rows = {row["case"]: row["cells"] for row in document["rows"]}
    assert list(rows) == ["NLM Y d1 a2 s4", "BM3D r0 luma", "NLM Y d1 a2 s4 + Python ModifyFrame"]
    for cells in rows.values():
        for column in ("avdenoise cold", "avdenoise warm", "source"):
            assert "error" not in cells[column], cells[column]
            (run,) = cells[column]["runs"]
            assert run["frames"] == run["expected_frames"] == 2 * 4
            assert sum(w["frames_out"] for w in run["per_worker"]) == 8
            assert run["fps"] > 0 and cells[column]["fps"] > 0
            assert 0 < run["mean_first_frame_s"] <= run["slowest_worker_s"] <= run["wall_s"]
            if shutil.which("nvidia-smi") is None:
                assert run["gpu"]["reason"] == "nvidia-smi not found"
    # A rival that cannot load is n/a, with the reason.
    assert "BM3DCUDA_PLUGIN is not set" in rows["BM3D r0 luma"]["bm3dcuda"]["error"]
    assert "bm3dcuda" not in rows["NLM Y d1 a2 s4"]  # not a rival of NLM
    if "nlm_cuda" not in _namespaces():
        assert "nlm_cuda" in rows["NLM Y d1 a2 s4"]["nlm_cuda"]["error"]
    table = out_md.read_text()
    assert table == done.stdout
    assert "| BM3D r0 luma |" in table and "- n/a BM3D r0 luma / bm3dcuda:" in table


# --- several GPUs -------------------------------------------------------------------------


def _plan(gpus: int):
    import bench_fleet

    return bench_fleet.Plan(
        vspipe="vspipe", encoder=None, width=64, height=48, device="auto", threads=0,
        timeout=60.0, work=Path("."), env={}, gpus=gpus,
    )  # fmt: skip


def test_one_gpu_gives_no_worker_a_device() -> None:
    import bench_fleet

    for plugin in ("avdenoise", "source", "vszipcu", "knlm"):
        args = bench_fleet.worker_args(_plan(1), "NLM Y d1 a2 s4", plugin, 3)
        assert args == [
            "-a", "case=NLM Y d1 a2 s4", "-a", f"plugin={plugin}", "-a", "width=64",
            "-a", "height=48", "-a", "device=auto", "-a", "threads=0",
        ]  # fmt: skip
    env = {"PATH": "/bin"}
    assert bench_fleet.visible_devices(env, 1) is env


def test_rivals_get_devices_round_robin_and_ours_places_itself() -> None:
    import bench_fleet

    plan = _plan(2)
    ids = [bench_fleet.rival_device("bm3dcuda", worker, 2) for worker in range(5)]
    assert ids == [0, 1, 0, 1, 0]
    args = bench_fleet.worker_args(plan, "BM3D r0 luma", "knlm", 3)
    assert args[-2:] == ["-a", "device_id=1"]
    for plugin in ("avdenoise", "source", "bus"):
        args = bench_fleet.worker_args(plan, "BM3D r0 luma", plugin, 3)
        assert not any(part.startswith("device_id=") for part in args)
        assert "device=auto" in args


def test_several_gpus_show_the_workers_the_first_n() -> None:
    import bench_fleet

    assert bench_fleet.visible_devices({}, 3) == {"CUDA_VISIBLE_DEVICES": "0,1,2"}
    env = {"CUDA_VISIBLE_DEVICES": "4, 5,6", "PATH": "/bin"}
    assert bench_fleet.visible_devices(env, 2) == {"CUDA_VISIBLE_DEVICES": "4,5", "PATH": "/bin"}


def test_gpus_must_be_at_least_1() -> None:
    import bench_fleet

    with pytest.raises(SystemExit):
        bench_fleet.main(["--gpus", "0"])
    args, _ = bench_fleet.parse_args(["--gpus", "4"])
    assert args.gpus == 4 and bench_fleet.parse_args([])[0].gpus == 1


def test_the_cases_hand_the_device_to_the_rivals(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    monkeypatch.setattr(
        _fleet_cases.bench_nlm, "build_filter", lambda *args: seen.append(args[-1]) or "nlm"
    )
    monkeypatch.setattr(
        _fleet_cases.bench_bm3d, "_vszipcu", lambda *a, fused, device_id: seen.append(device_id)
    )
    _fleet_cases.CASES["NLM Y d1 a2 s4"].build(None, "knlm", "clip", "auto", 1)
    _fleet_cases.CASES["BM3D r0 luma"].build(None, "vszipcu", "clip", "auto", 0)
    _fleet_cases.CASES["NLM Y d1 a2 s4"].build(None, "vszipcu", "clip", "auto", None)
    assert seen == [1, 0, None]


NVIDIA_SMI_PER_GPU = """\
41021, 1734, 00000000:19:00.0
41022, 1698, 00000000:3B:00.0
41023, [N/A], 00000000:3B:00.0
41024, 1700, 00000000:19:00.0
41021, 12, 00000000:3B:00.0
"""


def test_memory_per_gpu() -> None:
    by_gpu = _fleet_gpu.parse_compute_apps_by_gpu(NVIDIA_SMI_PER_GPU)
    assert by_gpu == {
        "00000000:19:00.0": {41021: 1734, 41024: 1700},
        "00000000:3B:00.0": {41022: 1698, 41021: 12},
    }
    sampler = _fleet_gpu.GpuSampler(command=["true"], per_gpu=True)
    sampler._note_gpus(by_gpu)
    sampler.peaks = _fleet_gpu._pids_over_gpus(NVIDIA_SMI_PER_GPU)
    sampler.samples = 1
    summary = sampler.summary([41021, 41022, 41024])
    assert summary["per_worker_mib"] == [1746, 1698, 1700]
    assert summary["per_gpu_peak_mib"] == {"00000000:19:00.0": 3434, "00000000:3B:00.0": 1710}
    assert summary["per_gpu_workers"] == {"00000000:19:00.0": 2, "00000000:3B:00.0": 2}
    assert "per_gpu_peak_mib" not in _fleet_gpu.GpuSampler(command=["true"]).summary([1])


def _namespaces() -> set[str]:
    """Plugin namespaces VapourSynth autoloads here."""
    import vapoursynth as vs

    return {plugin.namespace for plugin in vs.core.plugins()}


# --- MPS ----------------------------------------------------------------------------------


def test_the_mps_daemon_is_told_to_quit_even_when_the_run_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "control.log"
    fake = tmp_path / "bin" / "nvidia-cuda-mps-control"
    fake.parent.mkdir()
    # Records each call: its arguments, its pipe folder and what it read (the quit command).
    fake.write_text(
        f'#!/bin/sh\nif [ "$1" = -d ]; then echo "start $CUDA_MPS_PIPE_DIRECTORY" >> {log};\n'
        f'else read line; echo "$line" >> {log}; fi\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(KeyError), _fleet_gpu.mps_daemon(tmp_path / "work") as env:
        assert Path(env["CUDA_MPS_PIPE_DIRECTORY"]).is_dir()
        assert Path(env["CUDA_MPS_LOG_DIRECTORY"]).is_dir()
        raise KeyError("a failed run")
    assert log.read_text().splitlines() == [f"start {tmp_path / 'work' / 'mps-pipe'}", "quit"]
