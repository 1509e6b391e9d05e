"""Build filters for the bridge: validate a call, plan its passes, pick a backend."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._backends import select_backend
from ._layout import check_same_layout, layout_from_info
from ._params import DENOISE_PARAMS
from ._paramspec import parse_arguments
from ._passes import plan_passes, untouched_planes

__all__ = ["FilterPlan", "create_denoise"]


class FilterPlan:
    """What the bridge needs to run a filter (see ``_native/bridge.c``).

    ``process`` is the backend's own bound method, so a frame costs one Python call.
    """

    __slots__ = ("inputs", "radius", "copy_planes", "backend", "process")

    def __init__(self, inputs: tuple[str, ...], radius: int, copy_planes, backend) -> None:
        self.inputs = inputs
        self.radius = radius
        self.copy_planes = copy_planes
        self.backend = backend
        self.process = backend.process


def create_denoise(args: Mapping[str, list[Any]]) -> FilterPlan:
    """``core.avdenoise.Denoise``: validate the arguments and build its plan."""
    function = "Denoise"
    values = parse_arguments(function, DENOISE_PARAMS, args, algorithm_key="algorithm")
    layout = layout_from_info(function, "clip", values["clip"])
    if values["ref"] is not None:
        check_same_layout(function, values["clip"], values["ref"], layout)
    if values["algorithm"] == "bm3d":
        raise NotImplementedError(
            f"avdenoise.{function}: algorithm='bm3d' is not available yet; use algorithm='nlm'"
        )
    passes = plan_passes(function, values, layout, channels_given="channels" in args)
    backend = select_backend(function, values["device"], values["accelerators"], passes, layout)
    inputs = ("clip", "ref") if values["ref"] is not None else ("clip",)
    return FilterPlan(inputs, values["radius"], untouched_planes(layout, passes), backend)
