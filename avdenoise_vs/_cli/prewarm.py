"""``python -m avdenoise_vs prewarm``: compile a script's CUDA kernels once, before an encode.

Every avdenoise filter compiles its kernels once it is created (on a thread of its own, under
the warm-up queue), and the queue stamps the cache when it is done. Run once before Av1an
starts its workers, this makes every worker find the stamp and load the cached kernels instead
of queueing. Nothing is rendered: creating the filters and waiting for their warm-ups is all it
takes.

The script is evaluated as vspipe evaluates it, in this process: ``__name__`` is
``"__vapoursynth__"``, ``__file__`` the script's absolute path, each ``-a key=value`` a global
string, and the working directory the script's own while it runs. What the queue did for each
kernel key comes from its report (``AVDENOISE_WARMUP_REPORT``, pointed at a temporary folder).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from avdenoise_vs._backends.pending import settle_all
from avdenoise_vs._cli._manual import denoise_option, option_help
from avdenoise_vs._cli._prewarm_report import read_outcomes, summary_lines

__all__ = ["add_parser", "denoise_on_blank_clip", "prewarm", "run", "run_script"]

_USAGE: Final[str] = """\
%(prog)s SCRIPT [-a KEY=VALUE ...] [--json]
       %(prog)s [--algorithm {nlm,bm3d}] [--format NAME] [--width N]
                                      [--height N] [--ref] [--PARAMETER VALUE ...] [--json]"""
_EPILOG: Final[str] = """\
examples:
  python -m avdenoise_vs prewarm encode.vpy -a src=input.mkv
      the filters of encode.vpy, as `vspipe encode.vpy -a src=input.mkv` creates them
  python -m avdenoise_vs prewarm --format YUV420P10 --radius 1
      one Denoise with its default algorithm (nlm) on a 10-bit 4:2:0 BlankClip
  python -m avdenoise_vs prewarm --algorithm bm3d --format YUV444PS --radius 1 --channels yuv
  python -m avdenoise_vs prewarm encode.vpy --json > prewarm.json

With a script, its filters give every setting (algorithm, radius, channels, ...): the
Denoise options above are for a prewarm without one. Frame size, strengths and thresholds
are launch arguments, not compile-time values: one prewarm serves every size and strength of
the same set-up. Exit status: 0 when every kernel is warm (or nothing needed compiling), 1
when the script or a compile failed, 2 for a usage error or a script that cannot be read.
"""
#: The BlankClip's settings without a script, when not given.
_BLANK_DEFAULTS: Final = {"format": "YUV420P8", "width": 1920, "height": 1080}


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``prewarm`` to the CLI, with one option per Denoise parameter."""
    from avdenoise_vs._params import DENOISE_PARAMS

    parser = commands.add_parser(
        "prewarm",
        help="compile the CUDA kernels of a script (or of one Denoise) before an encode",
        usage=_USAGE,
        description=__doc__.split("\n\n")[1],
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "script",
        nargs="?",
        type=Path,
        help=option_help(
            "the .vpy script to prewarm, evaluated as vspipe evaluates it",
            "none: one Denoise on a BlankClip", "encode.vpy",
        ),
    )  # fmt: skip
    parser.add_argument(
        "-a",
        "--arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=option_help(
            "a global string for the script, as vspipe's -a; repeat for more", "none",
            "-a src=input.mkv -a crf=30",
        ),
    )  # fmt: skip
    parser.add_argument(
        "--json",
        action="store_true",
        help=option_help("print the report as JSON", "text", "--json"),
    )
    blank = parser.add_argument_group(
        "without a script: one core.avdenoise.Denoise on a BlankClip",
        "Any Denoise parameter as --name value (a list as several values); those not\n"
        "given take Denoise's defaults.",
    )
    blank.add_argument(
        "--format",
        metavar="NAME",
        help=option_help("a preset format name, any case", "YUV420P8", "--format YUV420P10"),
    )
    for name, example in (("width", 3840), ("height", 2160)):
        blank.add_argument(
            f"--{name}",
            type=int,
            metavar="N",
            help=option_help(
                f"the BlankClip's {name} in pixels, which no kernel depends on",
                str(_BLANK_DEFAULTS[name]), f"--{name} {example}",
            ),
        )  # fmt: skip
    blank.add_argument(
        "--ref",
        action="store_true",
        help=option_help("pass a guide clip as ref", "no ref", "--ref"),
    )
    table = {param.name: param for param in DENOISE_PARAMS}
    for param in DENOISE_PARAMS:
        if param.kind != "clip":
            blank.add_argument(f"--{param.name}", **denoise_option(param, table))
    parser.set_defaults(run=run, prewarm_parser=parser)


def _denoise_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The Denoise parameters given on the command line."""
    prefix = "denoise_"
    return {
        name[len(prefix) :]: value
        for name, value in vars(args).items()
        if name.startswith(prefix) and value is not None
    }


def _script_globals(pairs: list[str], parser: argparse.ArgumentParser) -> dict[str, str]:
    """``-a key=value`` pairs as the script's globals (strings, as vspipe passes them)."""
    variables = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            parser.error(f"-a takes key=value with key a Python name, got {pair!r}")
        variables[key] = value
    return variables


def run_script(path: Path, variables: dict[str, str]) -> int:
    """Evaluate a .vpy script as vspipe does; return how many outputs it set.

    Raises
    ------
    Exception
        Whatever the script raises (``vapoursynth.Error`` from a filter, a bad path).
    """
    import vapoursynth as vs

    script = path.resolve()
    # utf-8-sig and the absolute __file__ are VSScript's (vapoursynth.pyx, evaluateScript).
    code = compile(script.read_bytes().decode("utf-8-sig"), str(script), "exec")
    namespace: dict[str, Any] = {**variables, "__name__": "__vapoursynth__"}
    namespace["__file__"] = str(script)
    previous = os.getcwd()
    # vspipe evaluates with the script's folder as working directory (evalSetWorkingDir);
    # putting it on sys.path too lets a script import helpers beside it, as it may expect.
    os.chdir(script.parent)
    sys.path.insert(0, str(script.parent))
    try:
        exec(code, namespace)  # the user's own script, as vspipe would run it
    finally:
        os.chdir(previous)
        if str(script.parent) in sys.path:
            sys.path.remove(str(script.parent))
    return len(vs.get_outputs())


def denoise_on_blank_clip(
    kwargs: dict[str, Any], video_format: str, width: int, height: int, ref: bool
) -> int:
    """Create one Denoise with `kwargs` on a BlankClip; return 1 (its one output).

    Raises
    ------
    ValueError
        When `video_format` is not a preset format name.
    vapoursynth.Error
        When Denoise rejects the settings.
    """
    import vapoursynth as vs

    preset = _preset(video_format)
    if preset is None:
        msg = f"--format must be a preset format such as YUV420P8 or GRAY16, got {video_format!r}"
        raise ValueError(msg)
    clip = vs.core.std.BlankClip(width=width, height=height, format=preset, length=24)
    if ref:
        kwargs = {**kwargs, "ref": clip}
    vs.core.avdenoise.Denoise(clip, **kwargs)
    return 1


def _preset(name: str) -> Any:
    """The ``vapoursynth.PresetVideoFormat`` called `name` (any case), or None."""
    import vapoursynth as vs

    return vs.PresetVideoFormat.__members__.get(name.upper())


def prewarm(build: Callable[[], int]) -> dict[str, Any]:
    """Create the filters `build` creates, and say what the warm-up queue did for each key.

    Parameters
    ----------
    build : callable
        Creates the filters (evaluates a script, or makes one Denoise) and returns how many
        outputs there are.

    Returns
    -------
    dict
        ``outputs``, ``backends`` (filters per backend), ``kernels`` (per key: the queue's
        outcome, whether its stamp is there now, what it is for), ``warnings`` (what reached
        VapourSynth's log), ``error`` and ``ok``.
    """
    import vapoursynth as vs

    from avdenoise_vs._backends.select import chosen_backends
    from avdenoise_vs._warmup.report import REPORT_ENV

    messages: list[str] = []

    def on_log(kind: int, text: str) -> None:
        if kind >= vs.MESSAGE_TYPE_WARNING:
            messages.append(text)

    previous = os.environ.get(REPORT_ENV)
    with tempfile.TemporaryDirectory(prefix="avdenoise-prewarm-") as report:
        os.environ[REPORT_ENV] = report
        handle = vs.core.add_log_handler(on_log)
        chosen_before = chosen_backends()
        outputs, error = 0, None
        try:
            outputs = build()
        except Exception as exc:  # the script's error is the report's
            error = _script_error(exc)
        finally:
            settle_all()  # the filters' warm-ups run on threads of their own
            vs.core.remove_log_handler(handle)
            vs.clear_outputs()  # nothing is rendered; leave the process as it was
            if previous is None:
                os.environ.pop(REPORT_ENV, None)
            else:
                os.environ[REPORT_ENV] = previous
        kernels = read_outcomes(Path(report), os.getpid())
    backends = dict(chosen_backends() - chosen_before)
    # The queue cannot tell a failed compile from a good one (the warm-up never fails a
    # filter); _backends.select' warning in VapourSynth's log can.
    failed = any(kernel.failed for kernel in kernels) or any(
        "warming up the" in text and "backend failed" in text for text in messages
    )
    return {
        "outputs": outputs,
        "backends": backends,
        "kernels": [kernel.as_dict() for kernel in kernels],
        "warnings": messages,
        "error": error,
        "ok": error is None and not failed,
    }


def _script_error(exc: Exception) -> str:
    """A script's exception: a vapoursynth.Error by its message (a filter's own words),
    anything else with its traceback, less the frames of this CLI."""
    if type(exc).__name__ == "Error" and type(exc).__module__ == "vapoursynth":
        return str(exc)
    report = traceback.TracebackException.from_exception(exc)
    ours = str(Path(__file__).parent)
    frames = [frame for frame in report.stack if not frame.filename.startswith(ours)]
    report.stack = traceback.StackSummary.from_list(frames)
    return "".join(report.format()).rstrip()


def _blank_options(args: argparse.Namespace) -> list[str]:
    """The options of a prewarm without a script that were given, as ``--name``."""
    given = [f"--{name}" for name in _BLANK_DEFAULTS if getattr(args, name) is not None]
    given += ["--ref"] if args.ref else []
    return given + [f"--{name}" for name in _denoise_kwargs(args)]


def _unreadable(script: Path) -> str | None:
    """Why `script` cannot be read, in a few words, or None when it can."""
    if not script.exists():
        return f"no such script: {script}"
    if not script.is_file():
        return f"not a file: {script}"
    try:
        script.open("rb").close()
    except OSError as error:
        return f"cannot read {script}: {error.strerror or error}"
    return None


def run(args: argparse.Namespace) -> int:
    """Run ``prewarm``; exit status 0 when every kernel is warm (or nothing needed it), 1 when
    the script or a compile failed, 2 for a usage error or a script that cannot be read."""
    parser = args.prewarm_parser
    kwargs, given = _denoise_kwargs(args), _blank_options(args)
    if args.script is not None:
        if given:
            parser.error(
                f"with a script, its filters give the settings: {', '.join(given)} "
                "are for one Denoise without a script"
            )
        variables = _script_globals(args.arg, parser)
        if (why := _unreadable(args.script)) is not None:
            print(f"{parser.prog}: error: {why}", file=sys.stderr)  # one line, no usage
            return 2
        result = prewarm(lambda: run_script(args.script, variables))
    elif given:
        if args.arg:
            parser.error("-a is for a script's globals; no script was given")
        blank = {name: getattr(args, name) or _BLANK_DEFAULTS[name] for name in _BLANK_DEFAULTS}
        if _preset(blank["format"]) is None:
            parser.error(
                f"--format must be a preset format (YUV420P8, GRAY16, RGBS, ...), "
                f"got {blank['format']!r}"
            )
        size = (blank["width"], blank["height"])
        result = prewarm(lambda: denoise_on_blank_clip(kwargs, blank["format"], *size, args.ref))
    else:
        parser.error("give a .vpy script, or Denoise options (--format, --algorithm, ...)")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print("\n".join(summary_lines(result)))
    return 0 if result["ok"] else 1
