"""The README and docs/ link only to files and headings that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\]\(([^()\s]+)\)")
_HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.MULTILINE)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.replace("`", "").lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(h) for h in _HEADING.findall(_FENCE.sub("", path.read_text()))}


def broken_links(path: Path) -> list[str]:
    """Relative links of ``path`` whose file, or heading in a markdown file, is missing."""
    prose = _CODE.sub("", _FENCE.sub("", path.read_text()))
    broken = []
    for target in _LINK.findall(prose):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(target)
    return broken


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_relative_links_resolve(path: Path) -> None:
    assert broken_links(path) == []


def test_the_checker_finds_missing_files_and_headings(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## `core.x.Y`: a drop-in\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md) [ok](other.md#corexy-a-drop-in) [ok](#page)\n"
        "[gone](missing.md) [no heading](other.md#nowhere) [web](https://example.com/x)\n"
        "`[in code](missing.md)`\n```\n[fenced](missing.md)\n```\n"
    )
    assert broken_links(page) == ["missing.md", "other.md#nowhere"]


def test_slug_follows_github() -> None:
    assert slug("Choosing NLM or BM3D and a strength") == "choosing-nlm-or-bm3d-and-a-strength"
    assert slug("`core.avdenoise.BM3D`: a drop-in for BM3DCUDA") == (
        "coreavdenoisebm3d-a-drop-in-for-bm3dcuda"
    )
    assert slug("Fleet: the way Av1an runs us (headline)") == "fleet-the-way-av1an-runs-us-headline"
