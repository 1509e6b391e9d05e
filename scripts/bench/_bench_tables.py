"""Read the curated tables of ``docs/BENCHMARKS.md``, for the speed charts of ``make_figures.py``.

The charts are drawn from the very cells a reader sees in the tables, so that the two can
never disagree: each table is kept with the heading it sits under and the paragraph above it,
which names the table's date and command line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Table", "gpu_name", "parse_fps", "parse_tables", "section_tables"]

#: A cell that holds a rate: "2694", "2694 fps", "749 (1717 MiB)", "2694 fps (46.21 dB, 722 MiB)".
_NUMBER = re.compile(r"(\d+(?:\.\d+)?)(?: fps)?(?: \(.*\))?")
#: A cell without a rate: empty, a dash (the rival has no such filter) or "n/a (why)".
_MISSING = re.compile(r"|[-\u2013\u2014]|n/a(?: \(.*\))?")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_CODE = re.compile(r"`([^`]+)`")
#: "NVIDIA H200" out of "NVIDIA H200 (143771 MiB), 16 CPU cores": the name stops at the brackets.
_GPU = re.compile(r"\bNVIDIA(?: [A-Z0-9][\w-]*)+")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")


@dataclass(frozen=True)
class Table:
    """One markdown table: the heading above it, the paragraph before it, its cells as text."""

    section: str
    caption: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    @property
    def date(self) -> str | None:
        """The first date (YYYY-MM-DD) of the caption: the day the table was measured."""
        found = _DATE.search(self.caption)
        return found[0] if found else None

    @property
    def command(self) -> str | None:
        """The first code span of the caption: the command line that measured the table."""
        found = _CODE.search(self.caption)
        return found[1] if found else None

    def column(self, name: str) -> list[str]:
        """The cells of the column headed ``name``, top to bottom."""
        index = self.header.index(name)
        return [row[index] for row in self.rows]


def _cells(line: str) -> tuple[str, ...]:
    """The cells of one table line, stripped; ``\\|`` is a pipe inside a cell."""
    inner = line.strip().removeprefix("|").removesuffix("|")
    return tuple(c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner))


def parse_tables(text: str) -> list[Table]:
    """Every table of a markdown document, in order.

    A table's caption is the last paragraph before it under the same heading, its lines joined
    by spaces, skipping paragraphs that are only images (the charts sit above the tables).
    Rows shorter than the header are padded with empty cells.
    """
    tables: list[Table] = []
    section, caption, paragraph = "", "", []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                block.append(_cells(lines[i]))
                i += 1
            caption, paragraph = _caption(paragraph, caption), []
            header, body = block[0], [r for r in block[1:] if not _is_rule(r)]
            rows = tuple(r + ("",) * (len(header) - len(r)) for r in body)
            tables.append(Table(section, caption, header, rows))
            continue
        if line.startswith("#"):
            section, caption, paragraph = line.lstrip("#").strip(), "", []
        elif not line:
            caption, paragraph = _caption(paragraph, caption), []
        else:
            paragraph.append(line)
        i += 1
    return tables


def _caption(paragraph: list[str], caption: str) -> str:
    """The caption after a paragraph ends: that paragraph, unless it is empty or only images."""
    text = " ".join(paragraph)
    return text if _IMAGE.sub("", text).strip() else caption


def _is_rule(cells: tuple[str, ...]) -> bool:
    """Whether a table line is the ``|---|:---:|`` line under the header."""
    return all(re.fullmatch(r":?-{3,}:?", c) for c in cells)


def section_tables(tables: list[Table], section: str) -> list[Table]:
    """The tables under the heading ``section`` (its exact text); ValueError when there are none.

    A heading renamed in the document must fail the figures, not drop a chart silently.
    """
    found = [t for t in tables if t.section == section]
    if not found:
        known = sorted({t.section for t in tables})
        raise ValueError(f"no table under the heading {section!r}; headings with tables: {known}")
    return found


def gpu_name(text: str) -> str | None:
    """The first NVIDIA GPU that ``text`` names ("NVIDIA H200"), or None."""
    found = _GPU.search(text)
    return found[0] if found else None


def parse_fps(cell: str) -> float | None:
    """The rate in a cell, None for a cell without one ('-', 'n/a', 'n/a (why)', empty).

    Raises ValueError for anything else, so that a column of other numbers ("2.89 / 4.44")
    charted by mistake fails instead of drawing the first of them.
    """
    cell = cell.strip()
    found = _NUMBER.fullmatch(cell)
    if found:
        return float(found[1])
    if _MISSING.fullmatch(cell):
        return None
    raise ValueError(f"not a rate or a missing cell: {cell!r}")
