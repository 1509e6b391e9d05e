"""``python -m avdenoise_vs doctor``: what this machine runs the filters with, and what to fix.

It reports the GPUs, the NVIDIA driver, CuPy and NVRTC, CuPy's kernel cache directory with
the warm-up stamps in it and who holds its lock files, CUDA MPS, VapourSynth and the
``avdenoise`` plugin, then lists the problems it found, each with its fix. Exit status 0 when
there is nothing to fix, 1 otherwise. Every probe is guarded: the doctor must answer on a
machine without CuPy, GPU or driver, since that is where it is needed most.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from avdenoise_vs._cli import _gpu, _python
from avdenoise_vs._cli._cachedir import human_bytes, scan
from avdenoise_vs._cli._locks import held_locks, lock_lines, lock_problems
from avdenoise_vs._cli._manual import option_help
from avdenoise_vs._errors import one_line
from avdenoise_vs._install import CUPY, VAPOURSYNTH, cupy_install, pip_install
from avdenoise_vs._warmup.cache import EMPTY_FIX, EMPTY_ORIGIN, EMPTY_WHY, configured_wait_s

__all__ = ["add_parser", "collect", "find_problems", "render", "run"]

logger = logging.getLogger(__name__)

_EPILOG = """\
examples:
  python -m avdenoise_vs doctor
      the report, then what to fix, each problem with its fix
  python -m avdenoise_vs doctor --json > doctor.json
      the same as JSON, for a bug report or a script

Run it with the Python that runs vspipe (the venv's), on the machine of the encode.
"""


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``doctor`` to the CLI."""
    parser = commands.add_parser(
        "doctor",
        help="report GPU, CuPy, cache and VapourSynth set-up, and what to fix",
        description=__doc__.split("\n\n")[1],
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help=option_help("print the report as JSON, problems included", "text", "--json"),
    )
    parser.set_defaults(run=run)


def _guarded(probe: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run a probe; a probe that raises anyway reports that instead of ending the doctor."""
    try:
        return probe()
    except Exception as exc:  # anything: the report names it, and the other probes still run
        return {"probe_error": f"{type(exc).__name__}: {exc}"}


def collect() -> dict[str, Any]:
    """Run every probe and find the problems.

    Returns
    -------
    dict
        One entry per probe (``driver``, ``cupy``, ``nvidia_smi``, ``gpus``, ``mps``,
        ``cache``, ``vapoursynth``, ``vsscript``, ``filelock``), then ``problems`` (a list of
        ``{"problem", "fix"}``) and ``ok``.
    """
    from avdenoise_vs import _version

    report: dict[str, Any] = {
        "avdenoise_vs": _version.__version__,
        "python": f"{sys.version.split()[0]} ({sys.executable})",
    }
    report["driver"] = _guarded(_gpu.probe_driver)
    report["cupy"] = _guarded(_gpu.probe_cupy)  # before the cache: CuPy decides its directory
    gpus = report["cupy"].get("gpus") or []
    report["nvidia_smi"] = None
    if not gpus or report["driver"].get("version") is None:
        report["nvidia_smi"] = _guarded(_gpu.probe_nvidia_smi)
        gpus = gpus or report["nvidia_smi"].get("gpus") or []
    report["gpus"] = gpus
    report["mps"] = _guarded(_gpu.probe_mps)
    report["cache"] = _guarded(_cache)
    report["vapoursynth"] = _guarded(_python.probe_vapoursynth)
    report["vsscript"] = _guarded(_python.probe_vsscript)
    report["filelock"] = _guarded(_python.probe_filelock)
    report["problems"] = find_problems(report)
    report["ok"] = not report["problems"]
    return report


def _cache() -> dict[str, Any]:
    """The cache directory probe, with the listing of its stamps and kernels, the lock files
    held now and the queue's wait limit."""
    info = _python.probe_cache_dir()
    try:
        info["wait_limit_s"] = configured_wait_s()
    except ValueError as exc:
        info["wait_error"] = str(exc)
    if info.get("directory"):
        listing = scan(Path(info["directory"]))
        info["listing"] = listing.as_dict()
        info["held_locks"] = held_locks(listing.locks)
    return info


def _major(version: str | None) -> int | None:
    """``'12.4'`` -> 12; None for None or nonsense."""
    match = re.match(r"\d+", version or "")
    return int(match.group()) if match else None


def find_problems(report: dict[str, Any]) -> list[dict[str, str]]:
    """The problems in a `collect` report, each with its fix, most basic first."""
    problems: list[dict[str, str]] = []

    def add(problem: str, fix: str) -> None:
        problems.append({"problem": problem, "fix": fix})

    driver, cupy = report.get("driver") or {}, report.get("cupy") or {}
    cuda = driver.get("cuda") or cupy.get("driver_cuda")
    major = _major(cuda)
    extra = None if major is None else ("cuda13" if major >= 13 else "cuda12")
    no_driver = not driver.get("library") and not cupy.get("driver_cuda") and not report["gpus"]
    if no_driver:
        add(
            "no NVIDIA driver found (libcuda cannot be loaded), so there is no GPU to run on",
            "install the NVIDIA driver (nvidia-smi then lists the GPU); until then "
            "device='auto' runs on the CPU (NumPy), exact but slow",
        )
    elif major is not None and major < 12:
        add(
            f"the NVIDIA driver supports CUDA {cuda} only; CuPy 14 needs 12 or newer",
            "update the NVIDIA driver",
        )
        extra = None
    if not cupy.get("installed"):
        add(
            "CuPy is not installed, so every filter runs on the CPU (NumPy), exact but slow",
            cupy_install(extra) + (f" (the driver supports CUDA {cuda})" if extra else ""),
        )
    else:
        _cupy_problems(cupy, report["gpus"], no_driver, cuda, extra, add)
    _cache_problems(report.get("cache") or {}, add)
    _vapoursynth_problems(report, add)
    lock = report.get("filelock") or {}
    if lock.get("ok") is False:
        have = lock.get("version") or "not installed"
        add(
            f"filelock {have} is below {lock.get('floor')}, the warm-up queue's floor",
            pip_install(f"filelock>={lock.get('floor')}"),
        )
    return problems


def _cupy_problems(cupy, gpus, no_driver, cuda, extra, add) -> None:
    """Problems of an installed CuPy: broken, doubled, built for a newer CUDA, no NVRTC."""
    packages = cupy.get("packages") or []
    if len(packages) > 1:
        add(
            f"several CuPy packages are installed ({', '.join(packages)}); they overwrite "
            "each other's files",
            "pip uninstall all of them, then " + cupy_install(extra),
        )
    if cupy.get("import_error"):
        if os.environ.get("CUPY_CACHE_DIR") == "":
            return  # that is why: the cache's problem says so, with its fix
        add(
            f"CuPy is installed but cannot be imported ({cupy['import_error']})",
            "reinstall it: " + cupy_install(extra, "--force-reinstall"),
        )
        return
    # A wheel's name says its CUDA major version: cupy-cuda12x, cupy-cuda13x.
    wheels = [m for p in packages if (m := re.match(r"cupy-cuda(\d+)x ", p))]
    built = int(wheels[0].group(1)) if wheels else None
    major = _major(cuda)
    if built is not None and major is not None and built > major:
        add(
            f"cupy-cuda{built}x is built for CUDA {built}, but the driver supports "
            f"CUDA {cuda} only",
            f"update the driver, or {cupy_install(extra)}",
        )
    if cupy.get("nvrtc_error"):
        wheels_for = f"cuda{built or major or 13}"
        install = cupy_install(wheels_for if wheels_for in CUPY else None)
        add(
            f"CuPy cannot load NVRTC, which compiles the kernels ({cupy['nvrtc_error']})",
            f"{install} (CuPy with NVIDIA's CUDA wheels), or install the CUDA Toolkit",
        )
    if not gpus and not no_driver:
        hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
        where = f"CUDA_VISIBLE_DEVICES={hidden!r} may hide them; " if hidden is not None else ""
        add(
            f"CuPy sees no GPU ({cupy.get('gpu_error') or 'none listed'})",
            f"{where}check that nvidia-smi lists the GPU and that the driver matches CuPy",
        )


def _cache_problems(cache: dict[str, Any], add) -> None:
    """A cache directory that cannot be written (CuPy would fail, the queue would be off), a
    lock another user holds, a wait limit that is not a number."""
    lock_problems(cache, add)
    if cache.get("origin") == EMPTY_ORIGIN:
        add(f"{EMPTY_WHY}, and every filter runs on the CPU", EMPTY_FIX)
    if cache.get("directory") and cache.get("writable") is False:
        add(
            f"CuPy's kernel cache directory {cache['directory']} cannot be written "
            f"({cache.get('error')}): every process compiles the kernels again",
            "make it yours (chown or chmod u+w), or point CUPY_CACHE_DIR at a directory you "
            "can write",
        )


def _vapoursynth_problems(report: dict[str, Any], add) -> None:
    """VapourSynth missing, the plugin not autoloaded, or vspipe without a Python."""
    vs = report.get("vapoursynth") or {}
    if not vs.get("installed"):
        add(f"VapourSynth cannot be imported ({vs.get('error')})", pip_install(VAPOURSYNTH))
        return
    if vs.get("error") and not vs.get("version"):
        add(
            f"a fresh VapourSynth core cannot be created ({vs['error']})",
            "run `vapoursynth check-env` and reinstall vapoursynth",
        )
    elif not vs.get("registered"):
        if vs.get("editable"):
            add(
                "the avdenoise plugin is not where VapourSynth autoloads plugins (an editable "
                "install loads it only into scripts that import avdenoise_vs)",
                "pip install . (not -e) in the avdenoise_vs checkout, or add "
                "`import avdenoise_vs` to the script",
            )
        else:
            add(
                "a fresh VapourSynth core has no avdenoise namespace",
                "pip install --force-reinstall . in the avdenoise_vs checkout, with the pip of "
                "this Python",
            )
    script = report.get("vsscript") or {}
    if script.get("configured") is False:
        add(f"vspipe cannot find Python ({script.get('message')})", "vapoursynth config")


def _gpu_lines(report: dict[str, Any]) -> list[str]:
    """The GPU section of the text report."""
    driver, cupy, smi = report["driver"], report["cupy"], report.get("nvidia_smi") or {}
    lines = []
    for gpu in report["gpus"]:
        memory = human_bytes(gpu["memory_bytes"]) if gpu.get("memory_bytes") else "? memory"
        lines.append(
            f"  GPU {gpu['index']}: {gpu['name']}, compute capability "
            f"{gpu['compute_capability']}, {memory}"
        )
    if not report["gpus"]:
        why = cupy.get("gpu_error") or smi.get("error")
        if why is None and not cupy.get("version"):
            smi_words = "nvidia-smi lists none" if smi.get("found") else "no nvidia-smi"
            why = f"CuPy cannot look, {smi_words}"
        lines.append(f"  no GPU found{f' ({why})' if why else ''}")
    version = driver.get("version") or smi.get("driver_version")
    cuda = driver.get("cuda") or cupy.get("driver_cuda")
    if version or cuda:
        lines.append(f"  driver: {version or 'version unknown'}, CUDA {cuda or 'unknown'}")
    else:
        lines.append(f"  driver: not found ({driver.get('error') or driver.get('probe_error')})")
    if cupy.get("version"):
        packages = ", ".join(cupy.get("packages") or []) or "no package metadata"
        lines.append(
            f"  CuPy {cupy['version']} ({packages}), CUDA runtime "
            f"{cupy.get('runtime') or 'unknown'}"
        )
        lines.append(
            f"  NVRTC {cupy['nvrtc']}"
            if cupy.get("nvrtc")
            else f"  NVRTC: cannot be loaded ({cupy.get('nvrtc_error')})"
        )
    elif cupy.get("import_error"):
        lines.append(f"  CuPy: cannot be imported ({cupy['import_error']})")
    else:
        lines.append("  CuPy: not installed (so NVRTC is not used)")
    lines.append("  CUDA MPS: " + _mps_words(report["mps"]))
    return lines


def _mps_words(mps: dict[str, Any]) -> str:
    """CUDA MPS's state in a few words."""
    if "probe_error" in mps:
        return f"unknown ({mps['probe_error']})"
    daemons = mps.get("daemons")
    seen = f", daemon pids {', '.join(map(str, daemons))}" if daemons else ""
    if mps.get("running"):
        stale = "" if daemons or daemons is None else " (no daemon process seen: stale?)"
        return f"running (control socket in {mps['pipe_directory']}{seen}){stale}"
    if daemons:
        return (
            f"a daemon runs{seen}, but not with the pipe directory "
            f"{mps['pipe_directory']} (CUDA_MPS_PIPE_DIRECTORY)"
        )
    return f"not running (no control socket in {mps['pipe_directory']})"


def _vapoursynth_lines(report: dict[str, Any]) -> list[str]:
    """The VapourSynth section of the text report."""
    vs, script, lock = report["vapoursynth"], report["vsscript"], report["filelock"]
    if not vs.get("version"):
        return [f"  VapourSynth: cannot be used ({vs.get('error') or vs.get('probe_error')})"]
    lines = [f"  VapourSynth {vs['version']} (API {vs.get('api') or '?'})"]
    if vs.get("registered"):
        version = f" {vs['plugin_version']}" if vs.get("plugin_version") else ""
        lines.append(
            f"  avdenoise{version}: registered in a fresh core, loaded from {vs.get('plugin_path')}"
        )
    else:
        lines.append("  avdenoise: not registered in a fresh core")
    if script.get("configured"):
        lines.append(f"  vspipe ({script.get('vspipe') or 'not found'}) finds Python")
    elif script.get("configured") is False:
        lines.append(f"  vspipe cannot find Python: {script.get('message')}")
    else:
        lines.append(f"  vspipe: not checked ({script.get('message') or 'not found'})")
    if lock.get("version"):
        lines.append(f"  filelock {lock['version']} (needs >= {lock.get('floor')})")
    return lines


#: Stamps the doctor lists; ``cache list`` shows them all.
_STAMPS_SHOWN = 5


def render(report: dict[str, Any]) -> str:
    """The text report of `collect`."""
    from avdenoise_vs._cli.cache import describe

    cache = report["cache"]
    lines = [f"avdenoise_vs {report['avdenoise_vs']}, Python {report['python']}", "", "GPU"]
    lines += _gpu_lines(report)
    lines += ["", "Kernel cache"]
    if cache.get("directory"):
        listing = scan(Path(cache["directory"]))
        origin = cache.get("origin") or "?"
        lines += describe(listing, origin, indent="  ", most=_STAMPS_SHOWN)
        if cache.get("writable") is False:
            lines.append(f"  not writable: {cache.get('error')}")
        lines += lock_lines(cache, "    ")
    elif cache.get("origin") == EMPTY_ORIGIN:
        lines.append("  CUPY_CACHE_DIR is set but empty: no folder, so CuPy cannot start")
    elif cache.get("origin") == "in-memory":
        lines.append("  CUPY_CACHE_IN_MEMORY=1: kernels stay in memory; no warm-up queue")
    else:
        lines.append(f"  unknown ({cache.get('error') or cache.get('probe_error')})")
    lines += ["", "VapourSynth"] + _vapoursynth_lines(report) + [""]
    if not report["problems"]:
        lines.append("Nothing to fix.")
    else:
        lines.append("What to fix")
        for number, item in enumerate(report["problems"], 1):
            lines += [f"  {number}. {item['problem']}", f"     fix: {item['fix']}"]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run the doctor; exit status 0 when there is nothing to fix, 1 otherwise."""
    report = collect()
    try:
        text = json.dumps(report, indent=2, default=str) if args.json else render(report)
    except Exception as exc:  # a probe's odd answer (anything) must not hide the others
        logger.warning(
            "doctor: the report cannot be shown as text (%s); here it is as JSON", one_line(exc)
        )
        text = json.dumps(report, indent=2, default=str)
    print(text)
    return 0 if report["ok"] else 1
