"""Tests of the command-line tools in scripts/, which import each other as top-level modules."""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

# The scripts are run as files, with their folder first on sys.path; importing them here
# needs the same.
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))
