"""A small benchmarks document in the shape of docs/BENCHMARKS.md, for the figures' tests."""

from __future__ import annotations

__all__ = ["BENCHMARKS_SAMPLE"]

BENCHMARKS_SAMPLE = """\
# Benchmarks

Machine and rivals in every table: NVIDIA H200 (143771 MiB), 16 CPU cores.

## Fleet

![speed of the fleet](images/speed-fleet.svg)

2026-12-02, `bash scripts/bench/device_run.sh benchfleet` (`scripts/bench/bench_fleet.py`): 16
workers at once.

| case | ours cold | ours warm | source | vszipcu | KNLMeansCL | ours warm / best | first frame s |
|---|---|---|---|---|---|---|---|
| NLM Y | 761 | 830 | 1708 | 355 | 221 | 2.34x | 2.89 / 4.44 |
| BM3D `r0` | 358 | 616 | 1408 | 457 | - | 1.26x | 2.89 / 3.67 |

## One process: NLM

2026-11-30, `BENCH_SECONDS=2 bash
scripts/bench/device_run.sh tests bench`, every rival:

| config | ours | vszipcu | ours / best |
|---|---|---|---|
| Y d1 | 2694 fps (46.21 dB, 722 MiB) | 747 (1717 MiB) | 3.61x |
| 10-bit | 1844 (816 MiB) | n/a (8/16-bit only) |
"""
