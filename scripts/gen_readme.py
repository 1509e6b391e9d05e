"""Regenerate the parameter and environment tables in README.md from the tables in the code.

python scripts/gen_readme.py          # rewrite README.md in place
python scripts/gen_readme.py --check  # exit 1 if README.md is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from avdenoise_vs._environment import debug_table
from avdenoise_vs._environment import markdown_table as environment_table
from avdenoise_vs._params import BM3D_PARAMS, DENOISE_PARAMS, NLMEANS_PARAMS
from avdenoise_vs._paramspec import markdown_table

README = Path(__file__).resolve().parents[1] / "README.md"
#: marker name in README.md -> the parameter table generated between its markers.
TABLES = {
    "parameters": DENOISE_PARAMS,
    "nlmeans-parameters": NLMEANS_PARAMS,
    "bm3d-parameters": BM3D_PARAMS,
}


def render(text: str) -> str:
    tables = {name: markdown_table(params) for name, params in TABLES.items()}
    tables["environment"] = environment_table()
    tables["debug"] = debug_table()
    for name, table in tables.items():
        begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
        head, _, rest = text.partition(begin)
        _, _, tail = rest.partition(end)
        text = f"{head}{begin}\n{table}\n{end}{tail}"
    return text


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md is out of date")
    check = parser.parse_args().check
    current = README.read_text()
    wanted = render(current)
    if check:
        sys.exit(0 if current == wanted else "README.md is out of date: run scripts/gen_readme.py")
    README.write_text(wanted)
