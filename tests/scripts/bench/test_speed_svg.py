"""scripts/bench/_speed_svg.py and make_figures' charts: one bar per rate, lengths in proportion."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import make_figures
import pytest
from _bench_tables import parse_tables
from _speed_svg import BAR_LENGTH, SVG_NS, panel_of, render_svg

from tests.scripts.bench._figure_samples import BENCHMARKS_SAMPLE

ROOT = Path(__file__).resolve().parents[3]
NS = {"svg": SVG_NS}


def _chart() -> ET.Element:
    """The two sample tables as one chart, parsed back."""
    tables = parse_tables(BENCHMARKS_SAMPLE)
    panels = [panel_of(t, t.section, "NVIDIA H200") for t in tables]
    return ET.fromstring(render_svg("sample", panels))


def _bars(panel: ET.Element) -> list[tuple[str, float, float]]:
    """(series, value, width) of each bar of a panel, in document order."""
    return [
        (r.get("data-series"), float(r.get("data-value")), float(r.get("width")))
        for r in panel.iterfind("svg:rect[@class='bar']", NS)
    ]


def test_one_bar_for_each_rate_in_table_order() -> None:
    fleet, nlm = _chart().iterfind("svg:g[@class='panel']", NS)
    # Not "source" (no rival), the ratio or first-frame columns, nor the dash of KNLMeansCL.
    assert [(s, v) for s, v, _ in _bars(fleet)] == [
        ("ours cold", 761),
        ("ours warm", 830),
        ("vszipcu", 355),
        ("KNLMeansCL", 221),
        ("ours cold", 358),
        ("ours warm", 616),
        ("vszipcu", 457),
    ]
    # "n/a (8/16-bit only)" has no bar.
    assert [(s, v) for s, v, _ in _bars(nlm)] == [("ours", 2694), ("vszipcu", 747), ("ours", 1844)]


def test_bar_lengths_are_in_proportion_on_each_panel() -> None:
    for panel in _chart().iterfind("svg:g[@class='panel']", NS):
        bars = _bars(panel)
        top = max(v for _, v, _ in bars)
        for _, value, width in bars:
            assert width == pytest.approx(BAR_LENGTH * value / top, abs=0.01)


def test_rows_name_their_ratio_and_panels_their_run() -> None:
    texts = [t.text for t in _chart().iter(f"{{{SVG_NS}}}text")]
    assert "NLM Y  (ours warm / best: 2.34x)" in texts
    assert "BM3D r0  (ours warm / best: 1.26x)" in texts  # code marks dropped
    assert "2026-12-02, NVIDIA H200; command: bash scripts/bench/device_run.sh benchfleet" in texts
    command = "BENCH_SECONDS=2 bash scripts/bench/device_run.sh tests bench"
    assert f"2026-11-30, NVIDIA H200; command: {command}" in texts


def test_the_chart_has_a_size_and_a_white_ground() -> None:
    root = _chart()
    assert root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}"
    ground = root.find("svg:rect", NS)
    assert (ground.get("width"), ground.get("fill")) == ("100%", "#ffffff")


def test_a_new_column_of_other_numbers_fails_the_chart() -> None:
    text = "## X\n\n| config | ours | MiB |\n|---|---|---|\n| a | 10 | 718 / 1708 |\n"
    with pytest.raises(ValueError, match="not a rate"):
        panel_of(parse_tables(text)[0], "X", None)


def test_the_committed_charts_are_drawn_from_docs_benchmarks() -> None:
    charts = make_figures.speed_charts((ROOT / "docs" / "BENCHMARKS.md").read_text())
    assert set(charts) == {"speed-fleet.svg", "speed-one-process.svg"}
    for name, svg in charts.items():
        committed = (ROOT / "docs" / "images" / name).read_text()
        assert committed == svg, (
            f"docs/images/{name} is out of date: run scripts/bench/make_figures.py"
        )


def test_only_speed_writes_the_charts_alone(tmp_path: Path) -> None:
    make_figures.main(["--only", "speed", "--out", str(tmp_path)])
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["speed-fleet.svg", "speed-one-process.svg"]
