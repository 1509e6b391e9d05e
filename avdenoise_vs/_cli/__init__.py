"""The command line, ``python -m avdenoise_vs COMMAND``: ``doctor``, ``prewarm``, ``cache``.

One module per command, each with ``add_parser(commands)`` and ``run(args) -> int``. Nothing
on the plugin's load path imports this package: VapourSynth loads the plugin in every
process it starts, and that must stay cheap.
"""

from __future__ import annotations

import argparse
import codecs
import sys

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
    _tolerant_output()
    args = build_parser().parse_args(argv)
    return args.run(args)


def _tolerant_output() -> None:
    """Let stdout and stderr print any path, whatever their encoding.

    A cache directory's name may hold characters that the output's encoding lacks
    (``PYTHONIOENCODING=ascii``, ``LC_ALL=C`` without UTF-8 mode), and printing one would end
    the command with a UnicodeEncodeError: such characters come out as backslash escapes
    (``\\xe9``) instead. Bytes of a name that were no text in the filesystem's encoding (held
    as surrogates) come out as the bytes they were, as ``ls`` prints them.
    """
    codecs.register_error(_ERRORS, _escape)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors=_ERRORS)
        except (AttributeError, ValueError, OSError):  # not a TextIOWrapper, or closed
            pass


_ERRORS = "avdenoise_vs.escape"


def _escape(error: UnicodeError) -> tuple[str | bytes, int]:
    """The error handler `_tolerant_output` installs, one character at a time."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    char = error.object[error.start]
    if 0xDC80 <= ord(char) <= 0xDCFF:  # a byte that surrogateescape decoding kept
        return bytes([ord(char) - 0xDC00]), error.start + 1
    return char.encode("ascii", "backslashreplace").decode("ascii"), error.start + 1
