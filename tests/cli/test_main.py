"""``python -m avdenoise_vs``: its help, and that loading the plugin never imports the CLI."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from avdenoise_vs._cli import build_parser, main
from avdenoise_vs._plugin.devload import plugin_installed

__all__: list[str] = []


def test_help_names_every_command(run_cli) -> None:
    done = run_cli("--help")
    assert done.returncode == 0, done.stderr
    for command in ("doctor", "prewarm", "cache"):
        assert command in done.stdout


@pytest.mark.parametrize(
    "command", [["doctor"], ["prewarm"], ["cache", "list"], ["cache", "clear"]]
)
def test_every_command_has_help(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    assert "usage: python -m avdenoise_vs" in capsys.readouterr().out


def _parsers(parser: argparse.ArgumentParser):
    """`parser` and every subcommand's parser under it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from _parsers(sub)


def test_every_option_says_its_default_and_gives_an_example() -> None:
    parsers = list(_parsers(build_parser()))
    assert len(parsers) == 6  # the program, doctor, prewarm, cache, cache list, cache clear
    for parser in parsers:
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                continue
            assert "(default: " in action.help and "; e.g. " in action.help, (
                parser.prog,
                action.dest,
                action.help,
            )


def test_every_command_has_examples_that_it_accepts() -> None:
    for parser in _parsers(build_parser()):
        assert "examples:\n" in (parser.epilog or ""), parser.prog
        commands = [
            line.strip().split(" > ")[0].split()
            for line in parser.epilog.splitlines()
            if line.strip().startswith("python -m avdenoise_vs ")
        ]
        assert commands, parser.prog
        for words in commands:
            assert " ".join(words).startswith(parser.prog), (parser.prog, words)
            build_parser().parse_args(words[3:])  # exits 2 on an example it rejects


def test_a_command_is_required() -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([])
    assert exit_info.value.code == 2


def test_importing_the_package_imports_no_cli() -> None:
    probe = (
        "import sys, avdenoise_vs; "
        "print(sorted(m for m in sys.modules if m.startswith('avdenoise_vs._cli')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_autoloading_the_plugin_imports_no_cli() -> None:
    if not plugin_installed():
        pytest.skip("the plugin is not installed where VapourSynth autoloads (editable install?)")
    probe = (
        "import sys, vapoursynth as vs; "
        "assert any(p.namespace == 'avdenoise' for p in vs.core.plugins()); "
        "print(sorted(m for m in sys.modules if m.startswith('avdenoise_vs._cli')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
