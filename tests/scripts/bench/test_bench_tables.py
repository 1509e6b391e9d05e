"""scripts/bench/_bench_tables.py: the markdown tables the speed charts are drawn from."""

from __future__ import annotations

import pytest
from _bench_tables import gpu_name, parse_fps, parse_tables, section_tables

from tests.scripts.bench._figure_samples import BENCHMARKS_SAMPLE


def test_tables_keep_their_heading_caption_and_cells() -> None:
    fleet, nlm = parse_tables(BENCHMARKS_SAMPLE)
    assert fleet.section == "Fleet"
    assert fleet.date == "2026-12-02"
    assert fleet.command == "bash scripts/bench/device_run.sh benchfleet"
    assert fleet.header == (
        "case",
        "ours cold",
        "ours warm",
        "source",
        "vszipcu",
        "KNLMeansCL",
        "ours warm / best",
        "first frame s",
    )
    assert fleet.rows == (
        ("NLM Y", "761", "830", "1708", "355", "221", "2.34x", "2.89 / 4.44"),
        ("BM3D `r0`", "358", "616", "1408", "457", "-", "1.26x", "2.89 / 3.67"),
    )
    assert nlm.section == "One process: NLM"
    assert nlm.column("vszipcu") == ["747 (1717 MiB)", "n/a (8/16-bit only)"]


def test_a_command_over_two_lines_is_one_line() -> None:
    nlm = parse_tables(BENCHMARKS_SAMPLE)[1]
    assert nlm.date == "2026-11-30"
    assert nlm.command == "BENCH_SECONDS=2 bash scripts/bench/device_run.sh tests bench"


def test_a_chart_above_a_table_is_not_its_caption() -> None:
    text = "## A\n\n2026-01-02, `run it`.\n\n![chart](a.svg)\n\n| x | y |\n|---|---|\n| a | 1 |\n"
    (table,) = parse_tables(text)
    assert table.caption == "2026-01-02, `run it`."


def test_a_short_row_is_padded_with_empty_cells() -> None:
    nlm = parse_tables(BENCHMARKS_SAMPLE)[1]
    assert nlm.rows[1] == ("10-bit", "1844 (816 MiB)", "n/a (8/16-bit only)", "")


def test_an_escaped_pipe_stays_in_its_cell() -> None:
    (table,) = parse_tables("| a | b |\n|:---|---:|\n| x \\| y | 2 |\n")
    assert table.rows == (("x | y", "2"),)


def test_the_gpu_is_named_without_its_memory() -> None:
    assert gpu_name(BENCHMARKS_SAMPLE) == "NVIDIA H200"
    assert gpu_name("no GPU here") is None


@pytest.mark.parametrize(
    ("cell", "rate"),
    [
        ("2694", 2694.0),
        ("46.5", 46.5),
        ("2694 fps (46.21 dB, 722 MiB)", 2694.0),
        ("749 (1717 MiB)", 749.0),
        ("-", None),
        ("", None),
        ("n/a", None),
        ("n/a (8/16-bit only)", None),
    ],
)
def test_a_cell_gives_its_rate_or_none(cell: str, rate: float | None) -> None:
    assert parse_fps(cell) == rate


@pytest.mark.parametrize("cell", ["2.89 / 4.44", "fast", "1.26x"])
def test_a_cell_of_other_numbers_is_an_error(cell: str) -> None:
    with pytest.raises(ValueError, match="not a rate"):
        parse_fps(cell)


def test_a_heading_without_tables_is_an_error() -> None:
    tables = parse_tables(BENCHMARKS_SAMPLE)
    assert [t.section for t in section_tables(tables, "Fleet")] == ["Fleet"]
    with pytest.raises(ValueError, match="no table under the heading 'Fleet: renamed'"):
        section_tables(tables, "Fleet: renamed")
