"""Typed Python functions beside the ``core.avdenoise`` namespace, built from the parameter table.

``avdenoise_vs.denoise(clip, ...)`` calls ``vapoursynth.core.avdenoise.Denoise(clip, ...)`` of
the current environment, and ``nlmeans`` and ``bm3d`` call ``NLMeans`` and ``BM3D``. Their
signatures and numpydoc docstrings are built from ``_params/`` when this module is imported,
because VapourSynth gives a plugin's functions no place for documentation: ``help()`` on
``core.avdenoise.Denoise`` shows VapourSynth's ``Function`` class. Static type checkers and
editors read ``_api.pyi``, which ``scripts/gen_stubs.py`` writes from the same table (a test
keeps it in step).

The functions check the type of every argument first, with messages that name it:
VapourSynth's Python module converts values by the signature's types before the plugin sees
them, truncating 1.5 to 1 for an integer and failing on a string for a number with a message
that names no parameter. Values are checked by the plugin, as from a ``.vpy`` script.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from avdenoise_vs._params import BM3D_PARAMS, DENOISE_PARAMS, NLMEANS_PARAMS
from avdenoise_vs._params.spec import LIST_KINDS, Choice, Param, check_names

__all__ = ["bm3d", "denoise", "nlmeans"]


@dataclass(frozen=True)
class ApiFunction:
    """One Python function of the API and the registered function it calls.

    Parameters
    ----------
    name : str
        The Python name (``denoise``).
    vs_name : str
        The function in the ``avdenoise`` namespace (``Denoise``).
    params : tuple of Param
        Its parameter table.
    summary : str
        The docstring's first line.
    description : str
        The docstring's extended summary.
    notes : str
        The docstring's Notes section (none if empty).
    references : tuple of str
        Keys of the works cited as [1], [2], ... in that order.
    example : str
        Arguments after ``clip`` in the docstring's example.
    """

    name: str
    vs_name: str
    params: tuple[Param, ...]
    summary: str
    description: str
    notes: str
    references: tuple[str, ...]
    example: str


_REFERENCES = {
    "nlm": 'A. Buades, B. Coll and J.-M. Morel, "A non-local algorithm for image denoising", '
    "CVPR 2005, https://doi.org/10.1109/CVPR.2005.38.",
    "bm3d": 'K. Dabov, A. Foi, V. Katkovnik and K. Egiazarian, "Image denoising by sparse 3-D '
    'transform-domain collaborative filtering", IEEE TIP 16(8), 2007, '
    "https://doi.org/10.1109/TIP.2007.901238.",
}

API_FUNCTIONS: tuple[ApiFunction, ...] = (
    ApiFunction(
        "denoise",
        "Denoise",
        DENOISE_PARAMS,
        "Denoise a clip with non-local means or BM3D: ``core.avdenoise.Denoise``.",
        "NLM has KNLMeansCL's maths [1]_; BM3D is Dabov et al.'s [2]_, CBM3D for joint "
        "channels and V-BM3D when radius > 0. It runs on a CUDA GPU through CuPy where one is "
        "available (``device='auto'``) and on the NumPy reference backend otherwise.",
        "NLM's cost grows with (2 radius + 1) (2 search_radius + 1)^2 and barely with "
        "patch_radius; BM3D's with bm_range^2 / block_step^2, and twice that with stages=2. "
        "The README's 'Strength' section gives the measurements behind the default strength.",
        ("nlm", "bm3d"),
        "strength=3.0, device='cpu'",
    ),
    ApiFunction(
        "nlmeans",
        "NLMeans",
        NLMEANS_PARAMS,
        "Non-local means with KNLMeansCL's signature and defaults: ``core.avdenoise.NLMeans``.",
        "A drop-in for ``core.knlm.KNLMeansCL`` (and vszipcu's and nlm_cuda's ``NLMeans``): "
        "the same arguments give KNLMeansCL's output [1]_. It runs the filter of "
        "``denoise(algorithm='nlm')``.",
        "",
        ("nlm",),
        "h=3.0",
    ),
    ApiFunction(
        "bm3d",
        "BM3D",
        BM3D_PARAMS,
        "BM3D with BM3DCUDA's signature and defaults: ``core.avdenoise.BM3D``.",
        "A drop-in for BM3DCUDA's ``bm3dcuda.BM3D`` (and vszipcu's ``BM3Dv2``) [1]_: without "
        "`ref` the basic estimate, with it the Wiener stage; at radius > 0 the temporal "
        "aggregation happens in the same call.",
        "",
        ("bm3d",),
        "sigma=3.0, device='cpu'",
    ),
)

_SCALAR_TYPES = {"clip": "vapoursynth.VideoNode", "int": "int", "float": "float"}
_SCALAR_TYPES |= {"bool": "bool", "str": "str"}


def literal(value: Any) -> str:
    """`value` as source code, strings in double quotes (the project's format)."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, tuple):
        items = ", ".join(map(literal, value))
        return f"({items},)" if len(value) == 1 else f"({items})"
    return repr(value)


def annotation(param: Param) -> str:
    """The parameter's type as Python writes it (``int | None``), for signatures and stubs."""
    # A choice is a str: any case is taken ('NLM'), which a Literal would reject.
    item = _SCALAR_TYPES[param.kind.removesuffix("[]")]
    text = f"{item} | Sequence[{item}]" if param.kind in LIST_KINDS else item
    return text if default_value(param) is not None or param.required else f"{text} | None"


def default_value(param: Param) -> Any:
    """The default the signature shows: None where the plugin decides (per algorithm)."""
    if param.required:
        return inspect.Parameter.empty
    if param.default is None or isinstance(param.default, Mapping):
        return None
    return tuple(param.default) if param.kind in LIST_KINDS else param.default


def signature(function: ApiFunction) -> inspect.Signature:
    """The Python signature: every parameter, in the registered order (positions included)."""
    return inspect.Signature(
        [
            inspect.Parameter(
                p.name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=default_value(p),
                annotation=annotation(p),
            )
            for p in function.params
        ],
        return_annotation="vapoursynth.VideoNode",
    )


def _doc_type(param: Param) -> str:
    """The numpydoc type of a parameter: ``{'nlm', 'bm3d'}, default 'nlm'``."""
    item = _SCALAR_TYPES[param.kind.removesuffix("[]")]
    if isinstance(param.allowed, Choice):
        item = "{" + ", ".join(map(repr, param.allowed.values)) + "}"
    text = f"{item} or sequence of {item}" if param.kind in LIST_KINDS else item
    if param.required:
        return text
    default = default_value(param)
    if default is None:
        return text + ", optional"
    return f"{text}, default {list(default) if isinstance(default, tuple) else default!r}"


def _doc_entry(param: Param) -> list[str]:
    """A parameter's numpydoc entry: its doc, the allowed values, default and alias."""
    text = param.doc
    if isinstance(param.default, Mapping):
        text += " Default: " + ", ".join(f"{k} {v!r}" for k, v in param.default.items()) + "."
    if param.kind != "clip":
        text += f" Allowed: {param.document_allowed()}."
    if param.algorithms is not None:
        text += " Only with " + " or ".join(f"algorithm={a!r}" for a in param.algorithms) + "."
    if param.alias:
        text += f" Alias: {param.alias}."
    return [f"{param.name} : {_doc_type(param)}", *_wrap(text, "    ")]


def _wrap(text: str, indent: str, width: int = 88, first: str | None = None) -> list[str]:
    """Lines of `text` no longer than `width`, starting with `indent` (`first` the first)."""
    lines, line = [], indent if first is None else first
    for word in text.split():
        if len(line) + len(word) + 1 > width and line.strip():
            lines.append(line)
            line = indent
        line += word if not line.strip() else " " + word
    return [*lines, line]


def docstring(function: ApiFunction) -> str:
    """The function's numpydoc docstring, generated from its parameter table."""
    lines = [function.summary, "", *_wrap(function.description, ""), ""]
    lines += ["Parameters", "----------"]
    for param in function.params:
        lines += _doc_entry(param)
    lines += ["", "Returns", "-------", "vapoursynth.VideoNode"]
    lines += ["    The denoised clip: the format, size and length of `clip`.", ""]
    lines += ["Raises", "------", "TypeError"]
    lines += _wrap(
        "For an argument of another name, or a value of the wrong type; the message names it.",
        "    ",
    )
    lines += ["vapoursynth.Error"]
    lines += _wrap(
        "From the plugin: for a value out of range, a parameter the call does not read, an "
        "unsupported format or an unusable device; the message names the parameter.",
        "    ",
    )
    if function.notes:
        lines += ["", "Notes", "-----", *_wrap(function.notes, "")]
    lines += ["", "References", "----------"]
    for number, key in enumerate(function.references, 1):
        lines += _wrap(f".. [{number}] {_REFERENCES[key]}", "   ", first="")
    lines += ["", "Examples", "--------"]
    lines += [
        ">>> import vapoursynth as vs",
        f">>> from avdenoise_vs import {function.name}",
        ">>> clip = vs.core.std.BlankClip(width=64, height=48, format=vs.YUV444P8, length=3)",
        f">>> {function.name}(clip, {function.example}).num_frames",
        "3",
    ]
    return "\n".join(lines) + "\n"


def _type_ok(param: Param, value: Any) -> bool:
    """Whether `value` has the parameter's type (one item of a list, for list kinds)."""
    kind = param.kind.removesuffix("[]")
    if kind == "clip":
        import vapoursynth

        return isinstance(value, vapoursynth.VideoNode)
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, numbers.Integral)
    number = numbers.Integral if kind == "int" else numbers.Real
    return isinstance(value, number) and not isinstance(value, bool)


def check_type(function: str, param: Param, value: Any) -> None:
    """Raise TypeError naming `param` where `value` is not of its type."""
    items = value
    if param.kind not in LIST_KINDS or isinstance(value, str):
        items = [value]
    elif not isinstance(value, Sequence):
        items = [value]  # a lone number where a list goes, as VapourSynth takes it
    if not all(_type_ok(param, item) for item in items):
        raise TypeError(
            f"avdenoise.{function}: {param.name} must be {param.describe_allowed()}, got {value!r}"
        )


def _make(function: ApiFunction) -> Callable[..., Any]:
    """The Python function that checks types and calls the registered one."""
    by_name = {p.name: p for p in function.params}
    sig = signature(function)

    def call(*args: Any, **kwargs: Any) -> Any:
        check_names(function.vs_name, function.params, kwargs)
        try:
            given = sig.bind(*args, **kwargs).arguments
        except TypeError as error:
            raise TypeError(f"avdenoise.{function.vs_name}: {error}") from None
        # Only what the caller gave goes on: defaults stay the plugin's, and None means unset.
        given = {name: value for name, value in given.items() if value is not None}
        for name, value in given.items():
            check_type(function.vs_name, by_name[name], value)
        import vapoursynth

        return getattr(vapoursynth.core.avdenoise, function.vs_name)(**given)

    call.__name__ = call.__qualname__ = function.name
    call.__module__ = "avdenoise_vs"
    call.__doc__ = docstring(function)
    call.__signature__ = sig
    return call


denoise, nlmeans, bm3d = (_make(function) for function in API_FUNCTIONS)
