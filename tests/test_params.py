"""The parameter table is the single source of truth: signature and README come from it."""

from __future__ import annotations

from pathlib import Path

from avdenoise_vs._bridge import plugin_functions
from avdenoise_vs._params import DENOISE_PARAMS
from avdenoise_vs._paramspec import markdown_table

README = Path(__file__).resolve().parents[1] / "README.md"


def test_registered_signature_lists_every_parameter(core):
    registered = dict(plugin_functions())["Denoise"]
    assert registered.startswith("clip:vnode;")
    for param in DENOISE_PARAMS:
        assert f"{param.name}:" in registered
    assert core.avdenoise.Denoise.signature.replace(" ", "") == registered


def test_readme_table_is_generated_from_the_code():
    assert markdown_table(DENOISE_PARAMS) in README.read_text(), (
        "README.md is out of date: run python scripts/gen_readme.py"
    )


def test_every_parameter_is_documented():
    for param in DENOISE_PARAMS:
        assert len(param.doc) > 20, param.name
        assert param.required or param.default is not None or param.kind in ("clip", "float")
