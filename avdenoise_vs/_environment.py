"""The environment variables the package reads: one table, the one source of truth.

The README's table and docs/ARCHITECTURE.md's are generated from :data:`VARIABLES` and
:data:`DEBUG_KEYS` (``scripts/gen_readme.py``). The code reads switches through
:func:`switch`, durations through :func:`seconds`, and the comparison switches, all in the one
variable ``AVDENOISE_DEBUG``, once per CUDA filter through :func:`cuda_tuning`; each checks the
value against its table. A bad value is an error that names the variable, the item
or value and what is allowed, raised when a CUDA filter is created (:func:`check_cuda_settings`):
what a CUDA backend reads before it knows that its device is there is read leniently, so that
no setting of a backend that cannot run fails ``device='auto'`` where the CPU runs instead.
The warm-up queue reads ``AVDENOISE_WARMUP`` and ``AVDENOISE_WARMUP_REPORT`` leniently
(``_warmup/queue.py``), because nothing about the queue may fail a render; its wait limit is checked
when a CUDA filter is created, before the queue runs.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass

__all__ = [
    "DEBUG",
    "DEBUG_KEYS",
    "VARIABLES",
    "DebugKey",
    "Variable",
    "CudaTuning",
    "check_cuda_settings",
    "cuda_tuning",
    "debug_table",
    "default",
    "markdown_table",
    "seconds",
    "switch",
]

#: The variable that holds the comparison switches, as ``key=value`` items.
DEBUG = "AVDENOISE_DEBUG"


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, the values it takes, its default and its doc."""

    name: str
    values: str  # as the generated tables show them
    default: str
    doc: str
    choices: tuple[str, ...] = ()  # the allowed values of a switch, lower case


@dataclass(frozen=True)
class DebugKey:
    """One key of ``AVDENOISE_DEBUG``: a switch (``choices``) or, without choices, a
    positive integer."""

    key: str
    values: str  # as the generated tables show them
    default: str
    doc: str
    choices: tuple[str, ...] = ()  # lower case; empty: a positive integer

    def parse(self, value: str, item: str) -> str | int:
        """The value of `item` (``key=value``) for this key.

        Raises
        ------
        ValueError
            When `value` is not one of the choices, or not a positive integer.
        """
        where = f"the environment variable {DEBUG}: {self.key}"
        if self.choices:
            value = value.lower()
            if value not in self.choices:
                allowed = ", ".join(repr(choice) for choice in self.choices)
                raise ValueError(f"{where} must be one of {allowed}, got {value!r} in {item!r}")
            return value
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"{where} must be a positive integer, got {value!r} in {item!r}")
        return int(value)


VARIABLES: tuple[Variable, ...] = (
    Variable(
        "AVDENOISE_WARMUP",
        "`0` / `1`",
        "1",
        "The warm-up queue: the first process compiles the CUDA kernels while the others "
        "wait. `0` (or `false`, `no`, `off`) turns it off, for comparisons.",
    ),
    Variable(
        "AVDENOISE_WARMUP_WAIT",
        "seconds (a number, at least 0)",
        "180",
        "Longest a process waits in the warm-up queue for the one ahead of it (which holds the "
        "queue's lock file while it compiles) before it compiles for itself. A bad value is an "
        "error when a CUDA filter is created.",
    ),
    Variable(
        "AVDENOISE_WARMUP_REPORT",
        "a folder",
        "unset",
        "Each process writes there what the warm-up queue did for it; "
        "`python -m avdenoise_vs prewarm` and `scripts/bench/fleet.py` set and read it.",
    ),
    Variable(
        "CUDA_DEVICE_MAX_CONNECTIONS",
        "an integer",
        "1",
        "Hardware queues per CUDA context. Unless you set it, the package sets 1 before CUDA "
        "starts: the driver creates contexts one at a time, and 16 workers starting together "
        "had a context after 1.0 s instead of 2.6 s (H200, `scripts/bench/cuda_start_probe.py`); "
        "our frame rates did not change beyond run-to-run noise. It applies to every CUDA "
        "plugin in the process if ours starts CUDA first.",
    ),
    Variable(
        "AVDENOISE_CUDA_SYNC",
        "`auto` / `spin` / `yield` / `block`",
        "auto",
        "How a VapourSynth thread waits for the GPU: spin on a core, yield it between polls, "
        "or sleep until the GPU is done. `auto`: NLM leaves it to the driver (spin while a "
        "process has fewer contexts than the machine has cores); a process whose first CUDA "
        "filter runs BM3D sleeps. Spinning or yielding costs CPU that an Av1an fleet's "
        "sources, encoders and other workers could use. A bad value is an error when a CUDA "
        "filter is created; runs on the CPU never read it.",
        choices=("auto", "spin", "yield", "block"),
    ),
    Variable(
        DEBUG,
        "`key=value,...`",
        "unset",
        "Switches for comparison benchmarks, never needed to render: comma-separated "
        "`key=value` items, the keys in docs/ARCHITECTURE.md "
        "(`transfer=direct,bm3d_workspaces=2`). A bad key or value is an error when a CUDA "
        "filter is created; runs on the CPU (`device='auto'` without a usable GPU included) "
        "never read it.",
    ),
)

#: The keys of ``AVDENOISE_DEBUG``: what the comparison benchmarks still switch.
DEBUG_KEYS: tuple[DebugKey, ...] = (
    DebugKey(
        "transfer",
        "`auto` / `direct` / `staged` / `staged-upload` / `staged-download`",
        "auto",
        "How frames cross the bus: straight from and to VapourSynth's memory, or through "
        "page-locked buffers (`auto`: staged from 3 MiB a frame, for one-frame windows and "
        "for BM3D), or staged one way only.",
        choices=("auto", "direct", "staged", "staged-upload", "staged-download"),
    ),
    DebugKey(
        "bm3d_workspaces",
        "a positive integer",
        "2 spatial, 3 V-BM3D",
        "Work buffers of a BM3D pass (V-BM3D: 2r + 1 frames of float planes each). V-BM3D "
        "runs that many frames on the GPU at once; a spatial pass runs 8 (or this many, if "
        "more), handing its work buffers from frame to frame on the GPU.",
    ),
    DebugKey(
        "bm3d_cache",
        "a positive integer",
        "2r + 5 per stage",
        "V-BM3D: accumulators kept on the GPU, one per frame and stage, each 2 planes of "
        "int64 per channel (most of V-BM3D's memory); fewer may filter a frame twice.",
    ),
)


@dataclass(frozen=True)
class CudaTuning:
    """The ``AVDENOISE_DEBUG`` items a CUDA filter runs with, read once when it is made.

    Attributes
    ----------
    transfer : str
        The ``transfer`` key (``"auto"`` unless given).
    bm3d_workspaces, bm3d_cache : int or None
        The keys of those names; None: the pass's own default.
    """

    transfer: str = "auto"
    bm3d_workspaces: int | None = None
    bm3d_cache: int | None = None


def cuda_tuning() -> CudaTuning:
    """The :class:`CudaTuning` that ``AVDENOISE_DEBUG`` gives now.

    Raises
    ------
    ValueError
        When ``AVDENOISE_DEBUG`` is malformed (see :func:`_debug_items`).
    """
    items = _debug_items(os.environ.get(DEBUG, ""))
    return CudaTuning(**items)


_BY_NAME = {variable.name: variable for variable in VARIABLES}
_BY_KEY = {key.key: key for key in DEBUG_KEYS}


def default(name: str) -> str:
    """The default of variable `name`, as the table gives it."""
    return _BY_NAME[name].default


def switch(name: str, *, lenient: bool = False) -> str:
    """The value of switch `name` (lower case), or its default when unset or empty.

    With `lenient`, a value that is not one of the choices gives the default too (see
    :func:`check_cuda_settings`).

    Raises
    ------
    ValueError
        When the value is not one of the switch's choices (unless `lenient`).
    """
    variable = _BY_NAME[name]
    value = os.environ.get(name, "").strip().lower()
    if not value or (lenient and value not in variable.choices):
        return variable.default
    if value not in variable.choices:
        allowed = ", ".join(repr(choice) for choice in variable.choices)
        raise ValueError(f"the environment variable {name} must be one of {allowed}, got {value!r}")
    return value


def seconds(name: str) -> float:
    """The number of seconds variable `name` gives, or its default when unset or empty.

    Raises
    ------
    ValueError
        When the value is not a finite number of at least 0.
    """
    variable = _BY_NAME[name]
    text = os.environ.get(name, "").strip()
    if not text:
        return float(variable.default)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(
            f"the environment variable {name} must be a number of seconds, at least 0, got {text!r}"
        )
    return value


def check_cuda_settings() -> None:
    """Check every switch a CUDA backend reads: the backend calls it once its device is
    known to be there, so that a bad value is that CUDA filter's error and never fails
    ``device='auto'`` on a machine where no CUDA backend can run (the CPU runs there).

    Raises
    ------
    ValueError
        For a bad ``AVDENOISE_CUDA_SYNC`` or ``AVDENOISE_WARMUP_WAIT`` (which the queue itself
        reads leniently), or a malformed ``AVDENOISE_DEBUG``.
    """
    switch("AVDENOISE_CUDA_SYNC")
    seconds("AVDENOISE_WARMUP_WAIT")
    _debug_items(os.environ.get(DEBUG, ""))


@functools.lru_cache(maxsize=8)
def _debug_items(text: str) -> dict[str, str | int]:
    """The items of ``AVDENOISE_DEBUG``'s value `text`, every one checked, by key.

    An empty value (``key=``) leaves the key's default. Parsed once per distinct value:
    backends read several keys, and tests change the variable.

    Raises
    ------
    ValueError
        For an item that is not ``key=value``, a key not in :data:`DEBUG_KEYS`, a key given
        twice, or a value its key does not take; the message names the variable, the item
        and what is allowed.
    """
    items: dict[str, str | int] = {}
    seen = set()
    for item in text.split(","):
        item = item.strip()
        if not item:  # "a=1,,b=2" and a trailing comma are harmless
            continue
        key, equals, value = item.partition("=")
        key = key.strip().lower()
        setting = _BY_KEY.get(key)
        if not equals or setting is None:
            known = ", ".join(repr(k) for k in _BY_KEY)
            raise ValueError(
                f"the environment variable {DEBUG} takes key=value items with a key of {known}, "
                f"got {item!r}"
            )
        if key in seen:
            raise ValueError(f"the environment variable {DEBUG} gives {key} twice, in {text!r}")
        seen.add(key)
        value = value.strip()
        if value:  # "key=" leaves the default, as an unset variable would
            items[key] = setting.parse(value, item)
    return items


def markdown_table() -> str:
    """The README's table of the variables."""
    lines = ["| variable | values | default | effect |", "|---|---|---|---|"]
    lines += [f"| `{v.name}` | {v.values} | {v.default} | {v.doc} |" for v in VARIABLES]
    return "\n".join(lines)


def debug_table() -> str:
    """docs/ARCHITECTURE.md's table of the keys of ``AVDENOISE_DEBUG``."""
    lines = ["| key | values | default | effect |", "|---|---|---|---|"]
    lines += [f"| `{k.key}` | {k.values} | {k.default} | {k.doc} |" for k in DEBUG_KEYS]
    return "\n".join(lines)
