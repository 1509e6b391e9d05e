"""Horizontal bar charts of the benchmark tables, as SVG written here (no plotting package).

One panel per table: a group of bars per row (ours, then each rival), every bar as long as
its rate on the panel's own scale, the row's ratio column beside its label, and the table's
date, GPU and command line under the panel.
"""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from _bench_tables import Table, parse_fps

__all__ = ["Bar", "Group", "Panel", "SVG_NS", "panel_of", "render_svg"]

SVG_NS = "http://www.w3.org/2000/svg"
#: Columns of a table that hold no rate to chart, and why.
NOT_RATES = {
    "source": "the script without a denoiser: the CPU side's ceiling, not a rival",
    "first frame s": "seconds, ours / best rival",
    "MiB a worker": "memory, ours / best rival",
}
#: Bar colours by column: ours in blue (cold lighter), each rival its own hue.
COLOURS = {
    "ours": "#1f6feb",
    "ours warm": "#1f6feb",
    "ours cold": "#8db9f5",
    "vszipcu": "#d9822b",
    "vszipcu fast_fused": "#f2b56b",
    "BM3DCUDA": "#8250df",
    "KNLMeansCL": "#2da44e",
    "nlm_cuda": "#6e7781",
}
OTHER_COLOUR = "#afb8c1"

WIDTH = 800
MARGIN = 16
LABEL_WIDTH = 150
"""Room left of the bars for the column names, right-aligned."""
BAR_LENGTH = 520
"""Length of a panel's longest bar; the others are in proportion on that panel's scale."""
BAR_HEIGHT = 12
BAR_GAP = 3
GROUP_LABEL = 18
GROUP_GAP = 8
TITLE = 26
CAPTION_LINE = 14
CAPTION_CHARS = 125
"""Characters a caption line holds at 11 px: 0.55 em a character, a little under WIDTH."""
PANEL_GAP = 22
SUBTITLE = "frames per second, higher is better; no bar: not run or not supported (see the table)"


@dataclass(frozen=True)
class Bar:
    """One rate: the column it came from and its value in frames per second."""

    series: str
    value: float


@dataclass(frozen=True)
class Group:
    """One row of a table: its label, its ratio cells ("ours / best: 2.34x") and its bars."""

    label: str
    note: str
    bars: tuple[Bar, ...]


@dataclass(frozen=True)
class Panel:
    """One chart: a title, the rows, and the caption lines under it."""

    title: str
    groups: tuple[Group, ...]
    caption: tuple[str, ...]

    @property
    def scale(self) -> float:
        """Pixels a frame per second: the longest bar is BAR_LENGTH."""
        top = max((b.value for g in self.groups for b in g.bars), default=0.0)
        return BAR_LENGTH / top if top > 0 else 0.0


def panel_of(table: Table, title: str, gpu: str | None) -> Panel:
    """The panel of one table: a bar for every rate, none for a missing cell.

    The first column labels the rows; columns with a ``/`` in their heading are ratios, shown
    beside the row's label; the columns of NOT_RATES are left out; every other column is a
    rate, and a cell there that is neither a rate nor missing raises ValueError.
    """
    ratios = [h for h in table.header[1:] if "/" in h]
    rates = [h for h in table.header[1:] if h not in ratios and h not in NOT_RATES]
    groups = []
    for row in table.rows:
        cells = dict(zip(table.header, row, strict=True))
        bars = tuple(
            Bar(name, value) for name in rates if (value := parse_fps(cells[name])) is not None
        )
        note = ", ".join(f"{name}: {cells[name]}" for name in ratios if cells[name])
        groups.append(Group(_plain(row[0]), _plain(note), bars))
    where = ", ".join(part for part in (table.date, gpu) if part)
    line = f"{where}; command: {table.command}" if table.command else where
    caption = tuple(textwrap.wrap(line, CAPTION_CHARS)) if line else ()
    return Panel(title, tuple(groups), caption)


def _plain(text: str) -> str:
    """Markdown's code marks taken out: an SVG shows them as backticks."""
    return text.replace("`", "")


def _text(parent: ET.Element, x: float, y: float, text: str, attrs: dict[str, str]) -> None:
    """A text element at (x, y), its baseline at y."""
    ET.SubElement(parent, "text", {"x": f"{x:g}", "y": f"{y:g}", **attrs}).text = text


def _panel(root: ET.Element, panel: Panel, top: float) -> float:
    """Draw one panel from ``top`` down; return where the next one may start."""
    g = ET.SubElement(root, "g", {"class": "panel"})
    y = top + 16
    _text(g, MARGIN, y, panel.title, {"font-size": "15", "font-weight": "bold"})
    y += TITLE - 16
    for group in panel.groups:
        label = f"{group.label}  ({group.note})" if group.note else group.label
        _text(g, MARGIN, y + 13, label, {"font-size": "12", "font-weight": "bold"})
        y += GROUP_LABEL
        for bar in group.bars:
            length = bar.value * panel.scale
            x0 = MARGIN + LABEL_WIDTH
            text_y = y + BAR_HEIGHT - 2
            _text(g, x0 - 6, text_y, bar.series, {"font-size": "11", "text-anchor": "end"})
            ET.SubElement(
                g,
                "rect",
                {
                    "class": "bar",
                    "x": f"{x0:g}",
                    "y": f"{y:g}",
                    "width": f"{length:.2f}",
                    "height": str(BAR_HEIGHT),
                    "fill": COLOURS.get(bar.series, OTHER_COLOUR),
                    "data-series": bar.series,
                    "data-value": f"{bar.value:g}",
                },
            )
            _text(g, x0 + length + 4, text_y, f"{bar.value:g}", {"font-size": "11"})
            y += BAR_HEIGHT + BAR_GAP
        y += GROUP_GAP
    for line in panel.caption:
        y += CAPTION_LINE
        _text(g, MARGIN, y, line, {"font-size": "11", "fill": "#57606a"})
    return y + PANEL_GAP


def render_svg(title: str, panels: list[Panel]) -> str:
    """The SVG document of ``panels`` one under the other, on a white ground.

    The ground is drawn because GitHub shows an SVG on its dark theme's background too.
    """
    root = ET.Element(
        "svg",
        {"xmlns": SVG_NS, "font-family": "Helvetica, Arial, sans-serif", "fill": "#1f2328"},
    )
    ET.SubElement(root, "title").text = title
    ET.SubElement(root, "rect", width="100%", height="100%", fill="#ffffff")
    y = 8.0
    _text(root, MARGIN, y + 16, title, {"font-size": "17", "font-weight": "bold"})
    y += 26
    _text(root, MARGIN, y + 12, SUBTITLE, {"font-size": "12", "fill": "#57606a"})
    y += 24
    for panel in panels:
        y = _panel(root, panel, y)
    height = round(y - PANEL_GAP + MARGIN)
    root.set("width", str(WIDTH))
    root.set("height", str(height))
    root.set("viewBox", f"0 0 {WIDTH} {height}")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"
