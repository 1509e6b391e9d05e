"""Build filters for the bridge: validate a call, plan its passes, pick a backend."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from avdenoise_vs._backends.pending import PendingBackend
from avdenoise_vs._backends.protocol import Backend, HostStep
from avdenoise_vs._backends.select import select_backend
from avdenoise_vs._log import vs_warning
from avdenoise_vs._params import BM3D_PARAMS, DENOISE_PARAMS, NLMEANS_PARAMS
from avdenoise_vs._params.options import FrameLayout
from avdenoise_vs._params.settings import Algorithm, PassSettings, untouched_planes
from avdenoise_vs._params.spec import Param, parse_arguments
from avdenoise_vs._params.translate import Call, translate
from avdenoise_vs._plugin.layout import check_same_layout, layout_from_info
from avdenoise_vs._plugin.passes import plan_bm3d_passes, plan_passes

__all__ = [
    "BACKEND_PROPERTY",
    "FilterPlan",
    "backend_name",
    "create_bm3d",
    "create_denoise",
    "create_nlmeans",
    "warn_ignored",
]

logger = logging.getLogger(__name__)

#: Turns a clip's layout into the passes that denoise it.
Planner = Callable[[FrameLayout], tuple[PassSettings, ...]]


#: Frame property of every output frame naming the backend that made it ('cuda' or 'cpu'),
#: so that a script, or the demo, can tell where device='auto' ran.
BACKEND_PROPERTY = "AvdenoiseBackend"


class FilterPlan:
    """What the bridge needs to run a filter (see ``_native/bridge.c``).

    ``process`` is the backend's own bound ``bridge_process``
    (:class:`~avdenoise_vs._backends.protocol.Backend`: it may leave the GIL-free part of a frame to
    the bridge), so a frame costs one Python call. ``props`` are set on every output frame. A
    backend still being chosen (:class:`~avdenoise_vs._backends.pending.PendingBackend`) is waited
    for by the first frames, which then put the backend chosen in its place, ``props`` included: the
    bridge reads them once the first frame's ``process`` has returned. A plan of GPU clips (`gpu`)
    takes the backend's frame path for them (``_native/gpu_frames.h``).
    """

    __slots__ = ("inputs", "radius", "copy_planes", "gpu", "backend", "process", "props",
                 "_pending")  # fmt: skip

    backend: Backend
    process: Callable[[int, tuple, tuple, tuple], HostStep | None]
    props: dict[str, int | float | str]

    def __init__(
        self, inputs: tuple[str, ...], radius: int, copy_planes, backend: Backend, gpu: bool = False
    ) -> None:
        self.inputs = inputs
        self.radius = radius
        self.copy_planes = copy_planes
        self.gpu = gpu
        self._pending = backend if isinstance(backend, PendingBackend) else None
        if self._pending is None:
            self._use(backend)
        else:
            self.backend, self.process, self.props = backend, self._process_when_chosen, {}

    def close(self) -> None:
        """The bridge's last call: a warm-up still running is waited for (see
        ``_backends.pending``)."""
        if self._pending is not None:
            self._pending.close()
        if self.backend.gpu_frames is not None:
            self.backend.gpu_frames.close()

    def _use(self, backend: Backend) -> None:
        self.backend = backend
        if self.gpu:  # GPU clips take the CUDA backend's own frame path (only it has one)
            gpu_frames = backend.gpu_frames
            self.process = _no_gpu_frames(backend) if gpu_frames is None else gpu_frames.process
        else:
            self.process = backend.bridge_process
        self.props = {BACKEND_PROPERTY: backend_name(backend)}

    def _process_when_chosen(
        self, n: int, frame_numbers: tuple, windows: tuple, dst: tuple
    ) -> HostStep | None:
        """A frame that may be among the first: wait for the backend, then run on it (the
        threads that get here at once all put the same backend in place)."""
        pending = self._pending
        assert pending is not None  # the plan's process only while it has a pending backend
        self._use(pending.resolved())
        return self.process(n, frame_numbers, windows, dst)


def _no_gpu_frames(backend: Backend) -> Callable[..., None]:
    """The process of a plan of GPU clips whose backend has no frame path for them: every frame
    fails, since its planes are exported handles and not the host addresses of CPU frames."""

    def refuse(n: int, frame_numbers: tuple, windows: tuple, dst: tuple) -> None:
        raise RuntimeError(f"avdenoise: the {backend_name(backend)} backend cannot take GPU clips")

    return refuse


def backend_name(backend: Backend) -> str:
    """The value of the ``AvdenoiseBackend`` frame property: the backend's name ('cpu' or
    'cuda')."""
    return backend.name


def create_denoise(args: Mapping[str, list[Any]]) -> FilterPlan:
    """``core.avdenoise.Denoise``: validate the arguments and build its plan."""
    values = parse_arguments("Denoise", DENOISE_PARAMS, args, algorithm_key="algorithm")
    warn_ignored("Denoise", DENOISE_PARAMS, values, args)
    if Algorithm(values["algorithm"]) is Algorithm.BM3D:
        _check_bm3d_ref("Denoise", args)
    call = translate("Denoise", DENOISE_PARAMS, values, args, values["algorithm"])
    return _build_plan(call, _denoise_planner(call))


def create_nlmeans(args: Mapping[str, list[Any]]) -> FilterPlan:
    """``core.avdenoise.NLMeans``: KNLMeansCL's signature, translated to Denoise's settings
    by its table (``_params/dropin.py``)."""
    values = parse_arguments("NLMeans", NLMEANS_PARAMS, args)
    warn_ignored("NLMeans", NLMEANS_PARAMS, values, args)
    call = translate("NLMeans", NLMEANS_PARAMS, values, args, Algorithm.NLM.value)
    return _build_plan(call, _denoise_planner(call))


def create_bm3d(args: Mapping[str, list[Any]]) -> FilterPlan:
    """``core.avdenoise.BM3D``: BM3DCUDA's signature and meaning (see ``plan_bm3d_passes``,
    which reads its per-plane arguments as they are)."""
    values = parse_arguments("BM3D", BM3D_PARAMS, args, algorithm=Algorithm.BM3D.value)
    warn_ignored("BM3D", BM3D_PARAMS, values, args)
    _check_bm3d_ref("BM3D", args)
    call = translate("BM3D", BM3D_PARAMS, values, args, Algorithm.BM3D.value)

    def planner(layout: FrameLayout) -> tuple[PassSettings, ...]:
        return plan_bm3d_passes("BM3D", values, layout)

    return _build_plan(call, planner)


def _denoise_planner(call: Call) -> Planner:
    """The passes of Denoise's settings; messages about ``channels`` repeat the script's."""

    def planner(layout: FrameLayout) -> tuple[PassSettings, ...]:
        return plan_passes(
            call.function,
            call.values,
            layout,
            call.as_written("channels"),
            call.spelling("channels"),
        )

    return planner


def warn_ignored(
    function: str, params: Sequence[Param], values: Mapping[str, Any], args: Mapping
) -> None:
    """Warn in VapourSynth's log about each argument the script gave that changes nothing:
    a compatibility argument (accepted so that a rival's call runs unchanged), or a setting of
    V-BM3D's predictive search with radius=0."""
    for param in params:
        if param.name not in args:
            continue
        given = f"avdenoise.{function}: {param.name}={values[param.name]!r} changes nothing"
        if param.ignored:
            vs_warning(logger, f"{given} here: {param.doc}")
        elif param.temporal and values["radius"] == 0:
            vs_warning(
                logger,
                f"{given} with radius=0: it steers V-BM3D's predictive search in the next "
                "frames, which only radius > 0 runs",
            )


def _check_bm3d_ref(function: str, args: Mapping[str, list[Any]]) -> None:
    """With ``ref``, BM3D runs the Wiener stage alone: settings of the other stage are errors."""
    if "ref" not in args:
        return
    if args.get("stages") == [1]:
        raise ValueError(
            f"avdenoise.{function}: stages=1 cannot take ref (ref is the pilot of the Wiener "
            "stage, which stages=1 leaves out)"
        )
    for name in ("lambda_ht", "luma_lambda_ht", "chroma_lambda_ht"):
        if name in args:
            raise ValueError(
                f"avdenoise.{function}: {name} is not used with ref (only the Wiener stage runs)"
            )


def _build_plan(call: Call, planner: Planner) -> FilterPlan:
    """Check the clips, split the work into passes and pick the backend.

    The guide clip's argument (``ref``, NLMeans' ``rclip``) is named as the call names it, in
    messages and for the bridge, which reads it by that name.
    """
    function, values = call.function, call.values
    layout = layout_from_info(function, call.name("clip"), values["clip"])
    if values["ref"] is not None:
        check_same_layout(function, call.name("ref"), values["clip"], values["ref"], layout)
    vulkan_uuid = _gpu_clip(call)
    gpu = vulkan_uuid is not None
    passes = planner(layout)
    if not passes:
        # Nothing to denoise (BM3D with every sigma 0): every plane is passed through, and
        # the CPU backend, which needs nothing, does nothing.
        backend = select_backend(function, "cpu", ["cpu"], passes, layout)
        return FilterPlan((call.name("clip"),), 0, tuple(range(layout.num_planes)), backend, gpu)
    backend = select_backend(
        function, values["device"], values["accelerators"], passes, layout, defer=True,
        vulkan_uuid=vulkan_uuid,
    )  # fmt: skip
    inputs: tuple[str, ...] = (call.name("clip"),)
    if values["ref"] is not None:
        inputs += (call.name("ref"),)
    radius = max(options.window_radius for options in passes)
    return FilterPlan(inputs, radius, untouched_planes(layout, passes), backend, gpu)


#: A GPU clip's ``vulkan_export`` (VkExternalMemoryHandleTypeFlagBits) that CUDA imports here.
_OPAQUE_FD = 1


def _gpu_clip(call: Call) -> str | None:
    """The Vulkan device's UUID of a GPU clip (the bridge marks clips, ``_native/gpu_frames.h``),
    None for a CPU clip.

    Raises
    ------
    ValueError
        For a GPU clip with a CPU guide clip or the other way round, ``device='cpu'``, or a
        device whose frames do not import into CUDA.
    """
    function, clip, ref = call.function, call.values["clip"], call.values["ref"]
    gpu = bool(clip.get("gpu"))
    if ref is not None and bool(ref.get("gpu")) != gpu:
        raise ValueError(
            f"avdenoise.{function}: {call.name('clip')} and {call.name('ref')} must both be GPU "
            "or both CPU clips"
        )
    if not gpu:
        return None
    if call.values["device"].name == "cpu":
        raise ValueError(
            f"avdenoise.{function}: device must be 'cuda' or 'auto' for a GPU clip, got 'cpu'"
        )
    export = clip.get("vulkan_export")
    if export != _OPAQUE_FD:
        raise ValueError(
            f"avdenoise.{function}: the Vulkan device exports frames as handle type {export}, "
            "and CUDA imports opaque file descriptors (1) here; std.GPUDownload makes the clip "
            "a CPU clip"
        )
    return clip["vulkan_uuid"]
