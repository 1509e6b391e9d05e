"""scripts/gen_readme.py: every generated table sits between its markers in its own document."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import gen_readme
import pytest

from avdenoise_vs._params import DENOISE_PARAMS
from avdenoise_vs._params.spec import markdown_table

ROOT = Path(__file__).resolve().parents[2]


def copy_documents(tmp_path: Path) -> Path:
    for name in gen_readme.TABLES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_check_passes_on_the_checkout() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_readme.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr


def test_a_stale_table_is_found_and_rewritten(tmp_path: Path) -> None:
    root = copy_documents(tmp_path)
    page = root / "docs" / "PARAMETERS.md"
    table = markdown_table(DENOISE_PARAMS)
    page.write_text(
        page.read_text().replace(table, table.replace(table.splitlines()[-1], "| stale |"))
    )
    assert gen_readme.stale_documents(root) == ["docs/PARAMETERS.md"]
    gen_readme.write_documents(root)
    assert gen_readme.stale_documents(root) == []
    assert page.read_text() == (ROOT / "docs" / "PARAMETERS.md").read_text()


def test_a_document_without_its_markers_is_an_error() -> None:
    tables = {"debug": lambda: "| table |"}
    with pytest.raises(ValueError, match="docs/X.md lacks the markers <!-- debug:begin -->"):
        gen_readme.render("no markers here\n", tables, "docs/X.md")
    text = "a\n<!-- debug:begin -->\nold\n<!-- debug:end -->\nb\n"
    assert gen_readme.render(text, tables) == (
        "a\n<!-- debug:begin -->\n| table |\n<!-- debug:end -->\nb\n"
    )


def test_each_table_is_in_one_document_only() -> None:
    texts = {name: (ROOT / name).read_text() for name in gen_readme.TABLES}
    for name, tables in gen_readme.TABLES.items():
        for marker, make in tables.items():
            holders = [other for other, text in texts.items() if make() in text]
            assert holders == [name], (marker, holders)
