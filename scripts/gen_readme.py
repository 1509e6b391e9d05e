"""Regenerate the tables of README.md and docs/ from the tables in the code.

python scripts/gen_readme.py          # rewrite the documents in place
python scripts/gen_readme.py --check  # exit 1 if a document is out of date

Each table sits between ``<!-- name:begin -->`` and ``<!-- name:end -->`` in its document:
the environment variables in README.md, the parameters in docs/PARAMETERS.md, the keys of
AVDENOISE_DEBUG in docs/ARCHITECTURE.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from avdenoise_vs._environment import debug_table
from avdenoise_vs._environment import markdown_table as environment_table
from avdenoise_vs._params import BM3D_PARAMS, DENOISE_PARAMS, NLMEANS_PARAMS
from avdenoise_vs._params.spec import markdown_table

ROOT = Path(__file__).resolve().parents[1]
#: Document (relative to the checkout) -> marker name -> what makes the table between its markers.
TABLES: dict[str, dict[str, Callable[[], str]]] = {
    "README.md": {"environment": environment_table},
    "docs/PARAMETERS.md": {
        "parameters": lambda: markdown_table(DENOISE_PARAMS),
        "nlmeans-parameters": lambda: markdown_table(NLMEANS_PARAMS),
        "bm3d-parameters": lambda: markdown_table(BM3D_PARAMS),
    },
    "docs/ARCHITECTURE.md": {"debug": debug_table},
}


def render(text: str, tables: dict[str, Callable[[], str]], document: str = "text") -> str:
    """``text`` with each table put between its markers; a missing marker is an error, since
    appending the table would hide a document that lost its place for it."""
    for name, make in tables.items():
        begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
        head, found_begin, rest = text.partition(begin)
        _, found_end, tail = rest.partition(end)
        if not (found_begin and found_end):
            raise ValueError(f"{document} lacks the markers {begin} ... {end}")
        text = f"{head}{begin}\n{make()}\n{end}{tail}"
    return text


def stale_documents(root: Path = ROOT) -> list[str]:
    """The documents whose tables differ from the code's (nothing is written)."""
    return [
        name
        for name, tables in TABLES.items()
        if (text := (root / name).read_text()) != render(text, tables, name)
    ]


def write_documents(root: Path = ROOT) -> None:
    for name, tables in TABLES.items():
        path = root / name
        path.write_text(render(path.read_text(), tables, name))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a document is out of date")
    if parser.parse_args().check:
        stale = stale_documents()
        sys.exit(f"{', '.join(stale)} out of date: run scripts/gen_readme.py" if stale else 0)
    write_documents()
