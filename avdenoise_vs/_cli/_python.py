"""``doctor``'s probes of the Python side: VapourSynth, vspipe's Python, filelock, the cache.

Like `_gpu`, every probe returns JSON-ready values and never raises. VapourSynth is asked in a
fresh interpreter, as vspipe would start it: the doctor's own process has already imported
this package, which in an editable install loads the plugin by hand and so would hide an
autoload that does not work.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

from avdenoise_vs._cli._gpu import PROBE_TIMEOUT_S
from avdenoise_vs._errors import one_line as _error

logger = logging.getLogger(__name__)

__all__ = [
    "FILELOCK_FLOOR",
    "probe_cache_dir",
    "probe_filelock",
    "probe_vapoursynth",
    "probe_vsscript",
]

#: filelock's floor when the package's metadata cannot be read (pyproject.toml's).
FILELOCK_FLOOR: Final[str] = "3.30.0"

# Run with the interpreter running the doctor; prints one JSON line. It must not import
# avdenoise_vs itself: what counts is what VapourSynth's autoloading registers.
_VS_PROBE: Final[str] = """
import json
out = {"version": None, "registered": False, "plugin_path": None, "plugin_version": None}
import vapoursynth as vs
out["version"] = "R{0.release_major}.{0.release_minor}".format(vs.__version__)
out["api"] = str(getattr(vs, "__api_version__", ""))
for plugin in vs.core.plugins():
    if plugin.namespace == "avdenoise":
        out["registered"] = True
        out["plugin_path"] = getattr(plugin, "plugin_path", None)
        version = getattr(plugin, "version", None)
        out["plugin_version"] = "{0.major}.{0.minor}".format(version) if version else None
        # The bridge's name starts with the whole version: "avdenoise_vs 0.1.0: ...".
        words = (getattr(plugin, "name", "") or "").partition(":")[0].split()
        if len(words) == 2 and words[0] == "avdenoise_vs":
            out["plugin_version"] = words[1]
print(json.dumps(out))
"""


def probe_vapoursynth() -> dict[str, Any]:
    """VapourSynth's version, and whether a fresh core registers ``avdenoise`` (and from where).

    Returns
    -------
    dict
        ``installed``, ``version`` (``R81.0``), ``api``, ``registered``, ``plugin_path``,
        ``plugin_version``, ``editable`` (the bridge is built inside the package, not installed
        where VapourSynth autoloads plugins) and ``error``.
    """
    from avdenoise_vs._plugin import devload as _devload

    info: dict[str, Any] = {"installed": False, "version": None, "registered": False}
    info.update(plugin_path=None, plugin_version=None, api=None, error=None)
    try:
        info["editable"] = _devload._DEV_LIBRARY.is_file() and not _devload.plugin_installed()
    # An unreadable folder; a VapourSynth without get_plugin_dir. Unknown, then.
    except (OSError, AttributeError) as exc:
        logger.debug("doctor: cannot tell an editable install: %s", _error(exc))
        info["editable"] = None
    try:
        done = subprocess.run(
            [sys.executable, "-c", _VS_PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S * 3,  # a core autoloads every plugin, some slow to load
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        info["error"] = _error(exc)
        return info
    lines = done.stdout.strip().splitlines()
    try:
        info.update(json.loads(lines[-1]), installed=True)
    except (IndexError, ValueError):
        tail = done.stderr.strip().splitlines()
        info["error"] = tail[-1] if tail else f"the probe exited with status {done.returncode}"
        info["installed"] = "ModuleNotFoundError: No module named 'vapoursynth'" not in done.stderr
    return info


def _vspipe() -> str | None:
    """The vspipe beside this interpreter (a virtual environment's), else the one on PATH."""
    beside = Path(sys.executable).with_name("vspipe.exe" if os.name == "nt" else "vspipe")
    return str(beside) if beside.is_file() else shutil.which("vspipe")


def probe_vsscript() -> dict[str, Any]:
    """Whether vspipe can find Python: ``vapoursynth config`` writes where it looks.

    ``vspipe --version`` starts VSScript, which fails with "Run `vapoursynth config`" when the
    configuration does not name this Python; without vspipe, VapourSynth's configuration file
    is read instead.

    Returns
    -------
    dict
        ``vspipe`` (its path or None), ``configured`` (bool, None when unknown), ``how``
        (``vspipe`` or ``config-file``), ``message``.
    """
    info: dict[str, Any] = {"vspipe": _vspipe(), "configured": None, "how": None, "message": None}
    if info["vspipe"] is not None:
        try:
            done = subprocess.run(
                [info["vspipe"], "--version"],
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S * 3,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            info["message"] = _error(exc)
        else:
            info["how"] = "vspipe"
            info["configured"] = done.returncode == 0
            if done.returncode != 0:
                text = (done.stderr + done.stdout).strip().splitlines()
                info["message"] = text[0] if text else f"exit status {done.returncode}"
            return info
    return _config_file(info)


def _config_file(info: dict[str, Any]) -> dict[str, Any]:
    """Read VapourSynth's ``vapoursynth.toml`` as its ``check-env`` does (R81 ``_utils.py``):
    configured when a key names this install's VSScript library."""
    try:
        import tomllib

        import vapoursynth

        if sys.platform == "win32":  # an installer's Python needs no file there
            return info
        home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        path = Path(home) / "vapoursynth" / "vapoursynth.toml"
        library = str(vapoursynth.get_vsscript()).replace("/lib64/", "/lib/")
        contents = tomllib.loads(path.read_text()) if path.is_file() else {}
    # No VapourSynth (or one without get_vsscript), an unreadable or undecodable file, bad
    # TOML (TOMLDecodeError is a ValueError), no home directory (RuntimeError).
    except (ImportError, AttributeError, OSError, RuntimeError, ValueError) as exc:
        info["message"] = _error(exc)
        return info
    info.update(how="config-file", configured=library in contents, message=str(path))
    return info


def _version_tuple(text: str) -> tuple[int, ...]:
    """The leading numeric parts of a version: ``'3.30.0rc1'`` -> ``(3, 30, 0)``."""
    parts = []
    for part in text.split("."):
        match = re.match(r"\d+", part)
        if match is None:
            break
        parts.append(int(match.group()))
        if match.end() != len(part):
            break
    return tuple(parts)


def probe_filelock() -> dict[str, Any]:
    """The installed filelock against the floor this package's metadata asks for.

    Returns
    -------
    dict
        ``version`` (None when not installed), ``floor``, ``ok``.
    """
    floor = FILELOCK_FLOOR
    try:
        for requirement in importlib.metadata.requires("avdenoise-vs") or ():
            if match := re.fullmatch(r"filelock\s*>=\s*([\w.]+)", requirement.strip()):
                floor = match.group(1)
    except importlib.metadata.PackageNotFoundError:  # running from a source tree
        pass
    try:
        version = importlib.metadata.version("filelock")
    except importlib.metadata.PackageNotFoundError:
        version = None
    ok = version is not None and _version_tuple(version) >= _version_tuple(floor)
    return {"version": version, "floor": floor, "ok": ok}


def probe_cache_dir() -> dict[str, Any]:
    """CuPy's kernel cache directory, where it came from, and whether this user can write it.

    Call after `_gpu.probe_cupy`, so that an imported CuPy, not the environment, decides.

    Returns
    -------
    dict
        ``directory`` (None with ``CUPY_CACHE_IN_MEMORY=1``), ``origin`` (``cupy``,
        ``CUPY_CACHE_DIR``, ``default`` or ``in-memory``), ``exists``, ``writable`` (for a
        directory not yet made: whether its nearest existing parent is) and ``error``.
    """
    from avdenoise_vs._warmup import cache as _warmup_cache

    info: dict[str, Any] = {"directory": None, "origin": None, "exists": False}
    info.update(writable=None, error=None)
    try:
        info["origin"] = _warmup_cache.cache_dir_origin()
        directory = _warmup_cache.cache_dir()
    except (OSError, RuntimeError) as exc:  # CuPy's own getter (up to CuPy 13) failing
        info["error"] = _error(exc)
        return info
    if directory is None:
        return info
    info["directory"] = str(directory)
    # os.path's tests, unlike Path's, answer False instead of raising on a permission error.
    info["exists"] = os.path.isdir(directory)
    probe = directory
    while not os.path.exists(probe) and probe.parent != probe:
        probe = probe.parent
    # os.access answers for the real uid, the one CuPy writes as; a root-owned directory left
    # by a `sudo` run is the usual way to get here.
    info["writable"] = os.path.isdir(probe) and os.access(probe, os.W_OK | os.X_OK)
    if not info["writable"]:
        info["error"] = f"{probe} is not a writable directory"
    return info
