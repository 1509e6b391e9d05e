"""The environment variables the package reads: one table, the one source of truth.

The README's list is generated from :data:`VARIABLES` (``scripts/gen_readme.py``), and the
code reads the benchmark switches through :func:`switch` and :func:`positive_int`, which check
the value against the table. A bad value is an error that names the variable, the value and
what is allowed, raised when a filter is created. The warm-up queue reads its own two
variables leniently (``warmup.py``), because nothing about the queue may fail a render.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["VARIABLES", "Variable", "default", "markdown_table", "positive_int", "switch"]


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, the values it takes, its default and its doc."""

    name: str
    values: str  # as the README shows them
    default: str
    doc: str
    choices: tuple[str, ...] = ()  # the allowed values of a switch, lower case


VARIABLES: tuple[Variable, ...] = (
    Variable(
        "AVDENOISE_WARMUP",
        "`0` / `1`",
        "1",
        "The warm-up queue: the first process compiles the CUDA kernels while the others "
        "wait. `0` (or `false`, `no`, `off`) turns it off, for comparisons.",
    ),
    Variable(
        "AVDENOISE_WARMUP_REPORT",
        "a folder",
        "unset",
        "Each process writes there what the queue did for it and when its filter reached "
        "its start-up steps; `scripts/fleet.py` sets and reads it.",
    ),
    Variable(
        "CUDA_DEVICE_MAX_CONNECTIONS",
        "an integer",
        "1",
        "Hardware queues per CUDA context. Unless you set it, the package sets 1 before CUDA "
        "starts: the driver creates contexts one at a time, and 16 workers starting together "
        "had a context after 1.0 s instead of 2.6 s (H200, `scripts/cuda_start_probe.py`); "
        "our frame rates did not change beyond run-to-run noise. It applies to every CUDA "
        "plugin in the process if ours starts CUDA first.",
    ),
    Variable(
        "AVDENOISE_CUDA_SYNC",
        "`auto` / `spin` / `yield` / `block`",
        "auto",
        "How a VapourSynth thread waits for the GPU: spin on a core, yield it between polls, "
        "or sleep until the GPU is done. `auto`: the driver's choice (spin while a process "
        "has fewer contexts than the machine has cores), except that BM3D frames sleep "
        "before their download, which ran V-BM3D about 10% faster (the whole context set "
        "to `block`: a third faster, but NLM 6-13% slower). Spinning costs CPU that an "
        "Av1an fleet's encoders and other workers could use.",
        choices=("auto", "spin", "yield", "block"),
    ),
    Variable(
        "AVDENOISE_CUDA_CALLS",
        "`held` / `released`",
        "held",
        "Kernel launches and event calls keep the GIL (`held`) or release it as CuPy's "
        "calls do; for comparisons.",
        choices=("held", "released"),
    ),
    Variable(
        "AVDENOISE_TRANSFER",
        "`auto` / `direct` / `staged` / `staged-upload` / `staged-download`",
        "auto",
        "How frames cross the bus: straight from and to VapourSynth's memory, or through "
        "page-locked buffers (`auto`: staged from 3 MiB a frame, and for one-frame windows); "
        "for comparisons.",
        choices=("auto", "direct", "staged", "staged-upload", "staged-download"),
    ),
    Variable(
        "AVDENOISE_HOST_COPIES",
        "`bridge` / `python`",
        "bridge",
        "Staged frames: the native bridge copies them between VapourSynth's frames and the "
        "page-locked buffers, and waits for the GPU, without the GIL, so that a frame takes "
        "the GIL once (`bridge`); or Python does (`python`); for comparisons.",
        choices=("bridge", "python"),
    ),
    Variable(
        "AVDENOISE_BM3D_WORKSPACES",
        "a positive integer",
        "4 spatial, 3 V-BM3D",
        "Frames of a BM3D pass on the GPU at once, each with its own work buffers (V-BM3D: "
        "2r + 1 frames of float planes); for comparisons.",
    ),
    Variable(
        "AVDENOISE_BM3D_CACHE",
        "a positive integer",
        "2r + 5 per stage",
        "V-BM3D: accumulators kept on the GPU, one per frame and stage, each 2 planes of "
        "int64 per channel (most of V-BM3D's memory); fewer may filter a frame twice; for "
        "comparisons.",
    ),
)

_BY_NAME = {variable.name: variable for variable in VARIABLES}


def default(name: str) -> str:
    """The default of variable `name`, as the table gives it."""
    return _BY_NAME[name].default


def switch(name: str) -> str:
    """The value of switch `name` (lower case), or its default when unset or empty.

    Raises
    ------
    ValueError
        When the value is not one of the switch's choices.
    """
    variable = _BY_NAME[name]
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return variable.default
    if value not in variable.choices:
        allowed = ", ".join(repr(choice) for choice in variable.choices)
        raise ValueError(f"the environment variable {name} must be one of {allowed}, got {value!r}")
    return value


def positive_int(name: str) -> int | None:
    """The positive integer in variable `name`, or None when unset or empty.

    Raises
    ------
    ValueError
        When the value is not a positive integer.
    """
    if name not in _BY_NAME:
        raise KeyError(name)  # only variables of the table are read
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise ValueError(
            f"the environment variable {name} must be a positive integer, got {text!r}"
        )
    return int(text)


def markdown_table() -> str:
    """The README's table of the variables."""
    lines = ["| variable | values | default | effect |", "|---|---|---|---|"]
    lines += [f"| `{v.name}` | {v.values} | {v.default} | {v.doc} |" for v in VARIABLES]
    return "\n".join(lines)
