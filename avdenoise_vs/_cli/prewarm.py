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

from avdenoise_vs._cli._prewarm_report import read_outcomes, summary_lines
from avdenoise_vs._pending import settle_all

__all__ = ["add_parser", "denoise_on_blank_clip", "prewarm", "run", "run_script"]

_EPILOG: Final[str] = """\
examples:
  python -m avdenoise_vs prewarm encode.vpy -a src=input.mkv
  python -m avdenoise_vs prewarm --algorithm nlm --format YUV420P8 --radius 1 --channels luma
  python -m avdenoise_vs prewarm --algorithm bm3d --format YUV444PS --radius 1 --channels yuv

Frame size, strengths and thresholds are launch arguments, not compile-time values: one
prewarm serves every size and strength of the same set-up.
"""
_LIST_TYPES: Final = {"int[]": int, "float[]": float, "str[]": str}
_TYPES: Final = {"int": int, "float": float, "str": str}


def _bool(text: str) -> bool:
    """``true``/``false``/``1``/``0`` (any case) as a bool, for boolean Denoise options."""
    value = text.strip().lower()
    if value in {"1", "true", "yes"}:
        return True
    if value in {"0", "false", "no"}:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``prewarm`` to the CLI, with one option per Denoise parameter."""
    from avdenoise_vs._params import DENOISE_PARAMS

    parser = commands.add_parser(
        "prewarm",
        help="compile the CUDA kernels of a script (or of one Denoise) before an encode",
        description=__doc__.split("\n\n")[1],
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("script", nargs="?", type=Path, help="the .vpy script to prewarm")
    parser.add_argument(
        "-a",
        "--arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a global string for the script, as vspipe's -a (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    blank = parser.add_argument_group(
        "without a script: one core.avdenoise.Denoise on a BlankClip",
        "Give --algorithm and any Denoise parameter as --name value (lists as several values).",
    )
    blank.add_argument(
        "--format", default="YUV420P8", help="a preset format name (default YUV420P8)"
    )
    blank.add_argument("--width", type=int, default=1920, help="default 1920")
    blank.add_argument("--height", type=int, default=1080, help="default 1080")
    blank.add_argument("--ref", action="store_true", help="pass a guide clip as ref")
    for param in DENOISE_PARAMS:
        if param.kind == "clip":
            continue
        options: dict[str, Any] = {"dest": f"denoise_{param.name}", "default": None}
        if param.kind in _LIST_TYPES:
            options.update(nargs="+", type=_LIST_TYPES[param.kind])
        else:
            options["type"] = _bool if param.kind == "bool" else _TYPES[param.kind]
        # Choices are shown, not enforced: the filter takes them in any case, and checks them.
        values = getattr(param.allowed, "values", None)
        options["metavar"] = (
            "{" + ",".join(values) + "}" if values else param.kind.removesuffix("[]").upper()
        )
        options["help"] = param.doc.split(". ")[0].rstrip(".") + "."
        blank.add_argument(f"--{param.name}", **options)
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

    from avdenoise_vs._warmup_report import REPORT_ENV

    messages: list[str] = []

    def on_log(kind: int, text: str) -> None:
        if kind >= vs.MESSAGE_TYPE_WARNING:
            messages.append(text)

    previous = os.environ.get(REPORT_ENV)
    with tempfile.TemporaryDirectory(prefix="avdenoise-prewarm-") as report:
        os.environ[REPORT_ENV] = report
        handle = vs.core.add_log_handler(on_log)
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
        backends, kernels = read_outcomes(Path(report), os.getpid())
    # The queue cannot tell a failed compile from a good one (the warm-up never fails a
    # filter); _backends' warning in VapourSynth's log can.
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


def run(args: argparse.Namespace) -> int:
    """Run ``prewarm``; exit status 0 when every kernel is warm (or nothing needed it)."""
    parser = args.prewarm_parser
    kwargs = _denoise_kwargs(args)
    if args.script is not None:
        if kwargs or args.ref:
            parser.error("give a script or Denoise options (--algorithm ...), not both")
        variables = _script_globals(args.arg, parser)
        result = prewarm(lambda: run_script(args.script, variables))
    elif "algorithm" in kwargs:
        if args.arg:
            parser.error("-a is for a script's globals; no script was given")
        if _preset(args.format) is None:
            parser.error(
                f"--format must be a preset format (YUV420P8, GRAY16, RGBS, ...), "
                f"got {args.format!r}"
            )
        size = (args.width, args.height)
        result = prewarm(lambda: denoise_on_blank_clip(kwargs, args.format, *size, args.ref))
    else:
        parser.error("give a .vpy script, or --algorithm nlm|bm3d for one Denoise")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print("\n".join(summary_lines(result)))
    return 0 if result["ok"] else 1
