"""A validated call in Denoise's terms: the drop-ins' translation, read from their tables.

Each parameter of a drop-in (``NLMeans``, ``BM3D``) says which Denoise parameter it sets and
how (``Param.maps_to``); :func:`translate` applies that to every parameter alike. The
:class:`Call` it returns keeps what messages need to name the script's own arguments: the
argument that set each setting, its value as written, and the drop-in's spelling of mapped
values. ``Denoise`` goes through the same step, its arguments as they are but ``device``,
read once into a :class:`~avdenoise_vs._params.device_choice.DeviceChoice`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from avdenoise_vs._params import DENOISE_PARAMS
from avdenoise_vs._params.device_choice import DeviceChoice
from avdenoise_vs._params.spec import LIST_KINDS, MapsTo, Param

__all__ = ["Call", "translate"]

#: Denoise's own ``device``: the validated string, read once into a device and a number.
_DENOISE_DEVICE = MapsTo("device", convert=DeviceChoice.parse)


@dataclass(frozen=True)
class Call:
    """One call of a registered function, translated.

    Parameters
    ----------
    function : str
        The function's name, for messages.
    values : dict
        Denoise's settings, one for each parameter of its table (``device`` a
        :class:`~avdenoise_vs._params.device_choice.DeviceChoice`).
    names : mapping
        Denoise's parameter name -> the function's argument that sets it.
    written : mapping
        Denoise's parameter name -> the value as the script wrote it, for the arguments it
        gave that do not leave the setting to the clip.
    spellings : mapping
        Denoise's parameter name -> {Denoise's value: the function's}, for value maps.
    """

    function: str
    values: dict[str, Any]
    names: Mapping[str, str]
    written: Mapping[str, Any]
    spellings: Mapping[str, Mapping[Any, Any]]

    def name(self, setting: str) -> str:
        """The function's argument for Denoise's `setting` (``rclip`` for ``ref``)."""
        return self.names.get(setting, setting)

    def as_written(self, setting: str) -> Any:
        """Denoise's `setting` as the script wrote it; None where it did not, or left it to
        the clip."""
        return self.written.get(setting)

    def spelling(self, setting: str) -> Mapping[Any, Any] | None:
        """The function's names of Denoise's values of `setting`; None where they are
        Denoise's own."""
        return self.spellings.get(setting)


def translate(
    function: str,
    params: Sequence[Param],
    values: Mapping[str, Any],
    args: Mapping[str, list[Any]],
    algorithm: str,
) -> Call:
    """`values` (``parse_arguments``' of `params`) as Denoise's settings when `algorithm` runs.

    Settings no argument sets hold Denoise's default; an argument the script left out sets
    its own default (an unset one, None, sets nothing), and one it gave wins over those.

    Raises
    ------
    ValueError
        When the script gave two arguments that set the same setting (``device_id`` and
        ``device``).
    """
    settings = {p.name: _mapping(p).apply(p.name, p.default_for(algorithm)) for p in DENOISE_PARAMS}
    settings["algorithm"] = algorithm
    names: dict[str, str] = {}
    written: dict[str, Any] = {}
    spellings: dict[str, dict[Any, Any]] = {}
    given: dict[str, str] = {}
    # Defaults first (a stable sort keeps the table's order), then what the script gave.
    for param in sorted((p for p in params if not p.ignored), key=lambda p: p.name in args):
        mapping, value = _mapping(param), values[param.name]
        target = mapping.target
        names.setdefault(target, param.name)
        if mapping.values is not None:
            spellings[target] = {v: k for k, v in mapping.values.items() if v is not None}
        if param.name in args:
            if target in given:
                first = given[target]
                raise ValueError(
                    f"avdenoise.{function}: {first} and {param.name} cannot both be given, got "
                    f"{first}={values[first]!r} and {param.name}={value!r}"
                )
            given[target] = names[target] = param.name
            if not mapping.leaves_to_clip(value):
                raw = args[param.name]
                written[target] = list(raw) if param.kind in LIST_KINDS else raw[0]
        if value is not None:
            settings[target] = mapping.apply(param.name, value)
    return Call(function, settings, names, written, spellings)


def _mapping(param: Param) -> MapsTo:
    """How `param` sets Denoise's settings: its table's translation, or (a Denoise parameter)
    itself."""
    if param.maps_to is not None:
        return param.maps_to
    return _DENOISE_DEVICE if param.name == "device" else MapsTo(param.name)
