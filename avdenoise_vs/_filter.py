"""Build filters for the bridge: validate a call, plan its passes, pick a backend."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._backends import select_backend
from ._layout import check_same_layout, layout_from_info
from ._params import DENOISE_PARAMS, KNLM_CHANNELS, NLMEANS_PARAMS
from ._paramspec import parse_arguments
from ._passes import plan_passes, untouched_planes

__all__ = ["FilterPlan", "create_denoise", "create_nlmeans"]


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
    values = parse_arguments("Denoise", DENOISE_PARAMS, args, algorithm_key="algorithm")
    return _build_plan("Denoise", values, channels_given="channels" in args, ref_arg="ref")


def create_nlmeans(args: Mapping[str, list[Any]]) -> FilterPlan:
    """``core.avdenoise.NLMeans``: KNLMeansCL's signature, translated to Denoise's settings."""
    knlm = parse_arguments("NLMeans", NLMEANS_PARAMS, args)
    channels = KNLM_CHANNELS[knlm["channels"].upper()]
    device = "auto" if knlm["device_id"] is None else f"cuda:{knlm['device_id']}"
    # Start from Denoise's own defaults, so that every setting a pass reads is present.
    values = {param.name: param.default_for("nlm") for param in DENOISE_PARAMS}
    values.update(
        clip=knlm["clip"],
        ref=knlm["rclip"],
        radius=knlm["d"],
        search_radius=knlm["a"],
        patch_radius=knlm["s"],
        strength=knlm["h"],
        channels=channels or "luma",
        wmode=knlm["wmode"],
        wref=knlm["wref"],
        device=device,
    )
    return _build_plan("NLMeans", values, channels_given=channels is not None, ref_arg="rclip")


def _build_plan(
    function: str, values: Mapping[str, Any], channels_given: bool, ref_arg: str
) -> FilterPlan:
    """Check the clips, split the work into passes and pick the backend.

    `ref_arg` is the guide clip's argument name in this function, which the bridge reads.
    """
    layout = layout_from_info(function, "clip", values["clip"])
    if values["ref"] is not None:
        check_same_layout(function, ref_arg, values["clip"], values["ref"], layout)
    passes = plan_passes(function, values, layout, channels_given)
    backend = select_backend(function, values["device"], values["accelerators"], passes, layout)
    inputs = ("clip", ref_arg) if values["ref"] is not None else ("clip",)
    return FilterPlan(inputs, values["radius"], untouched_planes(layout, passes), backend)
