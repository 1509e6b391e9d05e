"""The command line, ``python -m avdenoise_vs COMMAND``: ``doctor``, ``prewarm``, ``cache``.

One module per command, each with ``add_parser(commands)`` and ``run(args) -> int``. Nothing
on the plugin's load path imports this package: VapourSynth loads the plugin in every
process it starts, and that must stay cheap.
"""

from __future__ import annotations

import argparse

__all__ = ["build_parser", "main"]

_EPILOG = """\
examples:
  python -m avdenoise_vs doctor
  python -m avdenoise_vs prewarm encode.vpy -a src=input.mkv
  python -m avdenoise_vs prewarm --algorithm bm3d --format YUV420P10 --radius 1
  python -m avdenoise_vs cache list
  python -m avdenoise_vs cache clear --stamps-only --yes

Each command's help (python -m avdenoise_vs COMMAND --help) lists its options, each with its
default and an example.
"""


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m avdenoise_vs`` parser, with every command."""
    from avdenoise_vs import _version
    from avdenoise_vs._cli import cache, doctor, prewarm

    parser = argparse.ArgumentParser(
        prog="python -m avdenoise_vs",
        description="Set-up checks and CUDA kernel warm-up for avdenoise_vs.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version.__version__)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (doctor, prewarm, cache):
        module.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command in `argv` (default: ``sys.argv[1:]``); return its exit status."""
    args = build_parser().parse_args(argv)
    return args.run(args)
