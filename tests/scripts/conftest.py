"""Tests of the tools in scripts/ and scripts/bench/, which import each other as top-level
modules."""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

# The tools are run as files, with their folder first on sys.path; importing them here needs
# both folders there.
for folder in (SCRIPTS, SCRIPTS / "bench"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
