"""Help texts that read as a user's manual: every option says what it does, its default and
an example, and ``prewarm``'s Denoise options come from Denoise's parameter table."""

from __future__ import annotations

import argparse
import math
import re
import textwrap
from collections.abc import Mapping
from typing import Any, Final

from avdenoise_vs._params.spec import Choice, Param, Pattern, Range

__all__ = ["denoise_option", "filled", "option_help"]

_LIST_TYPES: Final = {"int[]": int, "float[]": float, "str[]": str}
_TYPES: Final = {"int": int, "float": float, "str": str}
#: Prefixes of the per-pass overrides (``luma_strength`` overrides ``strength``).
_OVERRIDES: Final = ("luma_", "chroma_")


def filled(text: str) -> str:
    """`text` wrapped to 88 columns, paragraph by paragraph: for the descriptions of parsers
    whose raw formatter keeps the epilog's examples as written."""
    return "\n\n".join(textwrap.fill(" ".join(part.split()), 88) for part in text.split("\n\n"))


def option_help(what: str, default: str, example: str) -> str:
    """``what (default: D; e.g. E)``, escaped for argparse (which formats help with ``%``)."""
    return f"{what} (default: {default}; e.g. {example})".replace("%", "%%")


def _bool(text: str) -> bool:
    """``true``/``false``/``1``/``0`` (any case) as a bool, for boolean Denoise options."""
    value = text.strip().lower()
    if value in {"1", "true", "yes"}:
        return True
    if value in {"0", "false", "no"}:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _words(value: Any) -> str:
    """A value as the command line spells it."""
    if isinstance(value, list | tuple):
        return " ".join(_words(item) for item in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _default(param: Param, table: Mapping[str, Param]) -> tuple[str, Any]:
    """The default in words, and the value an example starts from."""
    if isinstance(param.default, Mapping):
        words = ", ".join(f"{_words(v)} for {k}" for k, v in param.default.items())
        return words, next(iter(param.default.values()))
    if param.default is not None:
        return _words(param.default), param.default
    for prefix in _OVERRIDES:
        base = table.get(param.name.removeprefix(prefix))
        if param.name.startswith(prefix) and base is not None:
            return f"--{base.name}'s", _default(base, table)[1]
    return "unset", None


def _example(param: Param, start: Any) -> str:
    """A value other than the default where one is easy to name."""
    allowed = param.allowed
    if isinstance(allowed, Choice):
        others = [v for v in allowed.values if v != start and [v] != start]
        return _words(others[-1] if param.kind.endswith("[]") else others[0])
    if isinstance(allowed, Pattern):
        return "cuda:0" if param.name == "device" else _words(start)
    if isinstance(allowed, Range) and isinstance(start, int | float):
        if param.kind == "int":
            return _words(start + 1 if allowed.check(start + 1) else start - 1)
        doubled = float(start) * 2 if start else 1.0
        return _words(doubled if allowed.check(doubled) else float(start) / 2)
    if isinstance(allowed, Range) and math.isfinite(allowed.low):
        return _words(allowed.low)
    return _words(start)


def _first_sentence(doc: str) -> str:
    """A doc's first sentence: up to a full stop before a capital ("et al. 2007" goes on)."""
    return re.split(r"(?<!\bal)\.\s+(?=[A-Z'])", doc, maxsplit=1)[0].rstrip(".") + "."


def denoise_option(param: Param, table: Mapping[str, Param]) -> dict[str, Any]:
    """The ``add_argument`` keywords of a Denoise parameter as ``--name value``.

    Its help: the first sentence of its doc, which algorithm reads it, the values allowed,
    its default and an example. `table` holds every parameter by name (an override's default
    is its base parameter's).
    """
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
    what = _first_sentence(param.doc)
    if param.algorithms is not None:
        what += f" {', '.join(a.upper() for a in param.algorithms)} only."
    what += f" Allowed: {param.describe_allowed()}"
    default, start = _default(param, table)
    options["help"] = option_help(what, default, f"--{param.name} {_example(param, start)}")
    return options
