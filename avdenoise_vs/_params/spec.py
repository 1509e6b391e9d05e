"""Parameter descriptions: the one source of truth for each VapourSynth-facing argument.

A :class:`Param` holds a parameter's name, type, default, allowed values, the algorithms
that read it and its documentation. Everything else is generated from it: the VapourSynth
signature the bridge registers, argument validation, and docs/PARAMETERS.md's tables.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LIST_KINDS",
    "Choice",
    "MapsTo",
    "Param",
    "Pattern",
    "Range",
    "check_names",
    "markdown_table",
    "parse_arguments",
    "vs_signature",
]

#: VapourSynth signature type of each of our parameter types (a bool is an int, 0 or 1, as
#: VapourSynth's own ``bint``).
_VS_TYPES = {
    "clip": "vnode",
    "int": "int",
    "float": "float",
    "bool": "int",
    "str": "data",
    "int[]": "int[]",
    "float[]": "float[]",
    "str[]": "data[]",
}
#: Types whose value is a list; `allowed` checks each item.
LIST_KINDS = ("int[]", "float[]", "str[]")


@dataclass(frozen=True)
class Range:
    """A finite number from `low` to `high` (`high` may be ``math.inf``); `low` excluded if
    `open_low`.

    NaN and infinities are never in range, whatever the bounds: VapourSynth passes them to a
    float parameter as they are, and every backend needs finite settings.
    """

    low: float
    high: float = math.inf
    open_low: bool = False

    def check(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        above = value > self.low if self.open_low else value >= self.low
        return above and value <= self.high

    def describe(self, kind: str) -> str:
        if kind == "int":
            noun = "an integer"
        else:
            # "from low to high" excludes infinities by itself; an open end needs the word.
            noun = "a finite number" if self.high == math.inf else "a number"
        if self.high == math.inf:
            return f"{noun} {'>' if self.open_low else '>='} {_number(self.low)}"
        if self.open_low:
            return f"{noun} > {_number(self.low)} and at most {_number(self.high)}"
        return f"{noun} from {_number(self.low)} to {_number(self.high)}"


@dataclass(frozen=True)
class Choice:
    """One of a fixed set of values; strings match whatever their case (see `canonical`)."""

    values: tuple[Any, ...]

    def check(self, value: Any) -> bool:
        return self.canonical(value) in self.values

    def canonical(self, value: Any) -> Any:
        """The table's spelling of `value` ('NLM' is 'nlm'); anything else as it is."""
        if isinstance(value, str):
            folded = value.casefold()
            for known in self.values:
                if isinstance(known, str) and known.casefold() == folded:
                    return known
        return value

    def describe(self, kind: str) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)


@dataclass(frozen=True)
class Pattern:
    """A string matching a regular expression written in lower case, described in words; it
    matches whatever the case, and stands for its lower-case spelling (see `canonical`)."""

    regex: str
    words: str

    def check(self, value: str) -> bool:
        return re.fullmatch(self.regex, value, re.IGNORECASE) is not None

    def canonical(self, value: Any) -> Any:
        """`value` in lower case where it matches ('CUDA:0' is 'cuda:0'); else as it is."""
        return value.lower() if isinstance(value, str) and self.check(value) else value

    def describe(self, kind: str) -> str:
        return self.words


@dataclass(frozen=True)
class MapsTo:
    """The Denoise parameter that a drop-in's parameter sets, and how: its translation (see
    ``_params/translate.py``, which applies it). With neither `values` nor `convert` it is a rename:
    the value is Denoise's as it is.

    Parameters
    ----------
    target : str
        The Denoise parameter's name.
    values : mapping, optional
        A value map: the drop-in's value (in its table's spelling) to Denoise's. A value mapped
        to None leaves the choice to the clip, as a Denoise setting that is not given does:
        the setting then holds `unset`, and messages treat it as not written.
    unset : Any
        Denoise's value for a drop-in value mapped to None.
    convert : callable, optional
        A conversion: ``convert(name, value)`` is Denoise's value for the drop-in's argument
        `name` of value `value` (the name, for the messages that repeat it).
    words : str, optional
        How the docs name the Denoise setting (``device='cuda:N'``); the target by default.
    """

    target: str
    values: Mapping[Any, Any] | None = None
    unset: Any = None
    convert: Callable[[str, Any], Any] | None = None
    words: str | None = None

    def apply(self, name: str, value: Any) -> Any:
        """Denoise's value for the drop-in's argument `name` holding `value`."""
        if self.convert is not None:
            return self.convert(name, value)
        if self.values is None:
            return value
        mapped = self.values[value]
        return self.unset if mapped is None else mapped

    def leaves_to_clip(self, value: Any) -> bool:
        """Whether `value` leaves the Denoise setting to the clip (a value mapped to None)."""
        return self.values is not None and self.values[value] is None

    def alias(self) -> str:
        """The docs' name of the setting that this parameter is (``Denoise radius``)."""
        return f"Denoise {self.words or self.target}"


@dataclass(frozen=True)
class Param:
    """One argument of a VapourSynth function.

    Parameters
    ----------
    name : str
        Argument name as scripts spell it.
    kind : str
        ``"clip"``, ``"int"``, ``"float"``, ``"bool"`` (True or False, 1 or 0), ``"str"``, or a
        list: ``"int[]"``, ``"float[]"`` or ``"str[]"``.
    doc : str
        What it does: unit or scale, effect of larger values, cost.
    default : Any
        Value when not given; ``None`` means "not set" (the caller derives one), and a
        mapping gives a default per algorithm.
    allowed : Range, Choice or Pattern, optional
        The values accepted; for a list each element is checked.
    algorithms : tuple of str, optional
        Algorithms that read this parameter; ``None`` means every algorithm.
    alias : str, optional
        The same setting's name in other plugins (KNLMeansCL, BM3DCUDA), for the docs.
    required : bool
        Whether a script must pass it.
    max_items : int, optional
        Longest list accepted (lists only); ``None`` means any non-empty list. Per-plane lists
        take 3, one value per plane.
    ignored : bool
        A compatibility argument that is accepted and changes nothing: a script that gives it
        gets a warning in VapourSynth's log.
    temporal : bool
        Read only when ``radius > 0`` (V-BM3D's predictive search): a script that gives it
        with ``radius=0`` gets a warning in VapourSynth's log.
    maps_to : MapsTo, optional
        A drop-in's parameter: the Denoise parameter it sets, and how. Every parameter of a
        drop-in has one, except the `ignored` ones.
    """

    name: str
    kind: str
    doc: str
    default: Any = None
    allowed: Range | Choice | Pattern | None = None
    algorithms: tuple[str, ...] | None = None
    alias: str | None = None
    required: bool = False
    max_items: int | None = None
    ignored: bool = False
    temporal: bool = False
    maps_to: MapsTo | None = None

    def default_for(self, algorithm: str) -> Any:
        """The default that applies when `algorithm` runs."""
        if isinstance(self.default, Mapping):
            return self.default.get(algorithm)
        return self.default

    def describe_allowed(self) -> str:
        """The allowed values in words, for error messages and the docs."""
        if self.allowed is None:
            return {"clip": "a clip", "str": "a string", "bool": "True or False"}.get(
                self.kind, self.kind
            )
        text = self.allowed.describe(self.kind.removesuffix("[]"))
        if self.kind not in LIST_KINDS:
            return text
        if self.max_items is None:
            return "a non-empty list, each item " + text
        return f"a list of 1 to {self.max_items} items, each item {text}"

    def document_allowed(self) -> str:
        """The allowed values as the docs give them: those of strings are taken in any case."""
        text = self.describe_allowed()
        return text + ", in any case" if isinstance(self.allowed, (Choice, Pattern)) else text


def vs_signature(params: Sequence[Param]) -> str:
    """The argument string VapourSynth's ``registerFunction`` takes.

    It ends in ``any``: VapourSynth then passes arguments of other names on instead of
    rejecting them with its own message, and :func:`parse_arguments` names them and the
    nearest parameter.
    """
    parts = []
    for param in params:
        optional = "" if param.required else ":opt"
        parts.append(f"{param.name}:{_VS_TYPES[param.kind]}{optional};")
    return "".join(parts) + "any;"


def parse_arguments(
    function: str,
    params: Sequence[Param],
    args: Mapping[str, list[Any]],
    algorithm_key: str | None = None,
    algorithm: str = "nlm",
) -> dict[str, Any]:
    """Validate the bridge's arguments and fill in defaults.

    Parameters
    ----------
    function : str
        Function name, for messages (``avdenoise.<function>: ...``).
    params : sequence of Param
        The function's parameter table.
    args : mapping
        Argument name to list of values, as the bridge passes them.
    algorithm_key : str, optional
        Name of the parameter that selects the algorithm (its value decides which
        parameters may be given and which defaults apply).
    algorithm : str
        The algorithm of a function without an `algorithm_key` parameter.

    Returns
    -------
    dict
        Every parameter by name; unset optional ones hold their (algorithm's) default, and
        strings of a choice or pattern hold the table's spelling whatever the script's case.

    Raises
    ------
    ValueError, TypeError
        For a value out of range, of the wrong type, or a parameter that the chosen
        algorithm does not read. Messages read ``avdenoise.<function>: <param> must be ...``.
        TypeError for an argument of another name.
    """
    by_name = {p.name: p for p in params}
    check_names(function, params, args)
    # Strings take the table's spelling first, so that 'NLM' selects the algorithm 'nlm'.
    values = {
        name: _canonical(by_name[name], _scalar(by_name[name], raw)) for name, raw in args.items()
    }
    if algorithm_key is not None:
        algorithm = values.get(algorithm_key, by_name[algorithm_key].default)
    result = {}
    for param in params:
        if param.name not in values:
            result[param.name] = _canonical(param, param.default_for(algorithm))
            continue
        value = values[param.name]
        if param.kind != "clip":
            _check_value(function, param, value)
        if param.algorithms is not None and algorithm not in param.algorithms:
            raise ValueError(
                f"avdenoise.{function}: {param.name} is not used by {algorithm_key}="
                f"{algorithm!r} (it applies to {', '.join(map(repr, param.algorithms))})"
            )
        result[param.name] = bool(value) if param.kind == "bool" else value
    return result


def check_names(function: str, params: Sequence[Param], names: Iterable[str]) -> None:
    """Raise TypeError naming every argument that is not a parameter, and its nearest one."""
    known = [p.name for p in params]
    unknown = [name for name in names if name not in known]
    if not unknown:
        return
    parts = []
    for name in unknown:
        near = difflib.get_close_matches(name, known, n=1)
        parts.append(f"{name!r} (did you mean {near[0]!r}?)" if near else repr(name))
    noun = "argument" if len(unknown) == 1 else "arguments"
    message = f"avdenoise.{function}: unknown {noun} {', '.join(parts)}"
    if len(parts) > sum("did you mean" in part for part in parts):
        message += f"; {function} takes {', '.join(known)}"
    raise TypeError(message)


def _scalar(param: Param, raw: list[Any]) -> Any:
    """VapourSynth passes every argument as a list; scalars take its single element."""
    return list(raw) if param.kind in LIST_KINDS else raw[0]


def _canonical(param: Param, value: Any) -> Any:
    """`value` (each item of a list) in the table's spelling, for choices and patterns."""
    canonical = getattr(param.allowed, "canonical", None)
    if canonical is None:
        return value
    return [canonical(item) for item in value] if param.kind in LIST_KINDS else canonical(value)


def _check_value(function: str, param: Param, value: Any) -> None:
    if param.kind in LIST_KINDS:
        too_many = param.max_items is not None and len(value) > param.max_items
        ok = bool(value) and not too_many and all(map(_item_checker(param), value))
    else:
        ok = _item_checker(param)(value)
    if not ok:
        raise ValueError(
            f"avdenoise.{function}: {param.name} must be {param.describe_allowed()}, got {value!r}"
        )


def _item_checker(param: Param):
    """Whether one value (one item of a list) is allowed."""
    if param.kind == "bool":
        return lambda item: item in (0, 1)
    if param.allowed is None:
        return lambda item: True
    return param.allowed.check


def _number(value: float) -> str:
    """A bound as a script would write it: ``8``, ``2.5``, ``1e6``, ``1e-6``."""
    if float(value).is_integer() and abs(value) < 1e5:
        return str(int(value))
    # "%g" writes 1e+06 and 1e-06; scripts (and the messages) read better as 1e6 and 1e-6.
    return re.sub(r"e([+-])0*(\d)", lambda m: "e" + m[1].replace("+", "") + m[2], f"{value:g}")


def markdown_table(params: Sequence[Param]) -> str:
    """A parameter table of docs/PARAMETERS.md, generated so that it cannot drift from the code."""
    rows = ["| name | type | default | allowed | read by | doc |", "|---|---|---|---|---|---|"]
    for p in params:
        default = "required" if p.required else _describe_default(p.default)
        read_by = "all" if p.algorithms is None else ", ".join(p.algorithms)
        doc = p.doc + (f" (alias: {p.alias})" if p.alias else "")
        rows.append(
            f"| `{p.name}` | {p.kind} | {default} | {p.document_allowed()} | {read_by} | {doc} |"
        )
    return "\n".join(rows)


def _describe_default(default: Any) -> str:
    if default is None:
        return "unset"
    if isinstance(default, Mapping):
        return ", ".join(f"{k}: `{v!r}`" for k, v in default.items())
    return f"`{default!r}`"
