"""One version everywhere: the package's, its metadata's and the native plugin's."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest

from avdenoise_vs import __version__
from avdenoise_vs._cli import _python
from avdenoise_vs._plugin.devload import plugin_installed

ROOT = Path(__file__).resolve().parents[2]


def test_the_plugin_reports_the_package_version(core) -> None:
    (plugin,) = [p for p in core.plugins() if p.namespace == "avdenoise"]
    major, minor = (int(part) for part in re.match(r"(\d+)\.(\d+)", __version__).groups())
    assert (plugin.version.major, plugin.version.minor) == (major, minor)
    assert plugin.name.startswith(f"avdenoise_vs {__version__}: ")  # the whole version string
    assert core.avdenoise.version == plugin.version


def test_the_installed_metadata_has_the_version_license_and_description() -> None:
    metadata = importlib.metadata.metadata("avdenoise-vs")
    assert metadata["Version"] == __version__
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert metadata["Author"] or metadata["Author-email"]
    assert "Topic :: Multimedia :: Video" in metadata.get_all("Classifier")
    assert "vapoursynth" in metadata["Keywords"].split(",")
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert metadata.get_payload().startswith("# avdenoise_vs")
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")


def test_doctor_reports_the_plugins_whole_version() -> None:
    if not plugin_installed():
        pytest.skip("the plugin is not installed where VapourSynth autoloads (editable install?)")
    assert _python.probe_vapoursynth()["plugin_version"] == __version__


def test_the_development_bridge_is_where_the_editable_build_puts_it() -> None:
    """``import avdenoise_vs`` in an editable install loads the library setup.py builds in the
    package (its extension's dotted name), not one beside the module that loads it."""
    import avdenoise_vs
    from avdenoise_vs._plugin import devload

    setup = (ROOT / "setup.py").read_text()
    (name,) = re.findall(r'"(avdenoise_vs\._native\.libavdenoise)"', setup)
    package = Path(avdenoise_vs.__file__).resolve().parent
    built = package.parent.joinpath(*name.split(".")).with_suffix(".so")
    assert devload._DEV_LIBRARY == built == package / "_native" / "libavdenoise.so"
