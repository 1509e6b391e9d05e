"""avdenoise_vs as a backend of vsjetpack's ``vsdenoise.nl_means`` and ``vsdenoise.bm3d``.

vsjetpack picks a plugin through its ``backend=`` argument, and takes any object that answers
its calls, so a script switches to avdenoise_vs with one argument::

    from avdenoise_vs.vsjetpack import backend
    clip = vsdenoise.nl_means(clip, 0.6, planes=[1, 2], backend=backend)
    clip = vsdenoise.bm3d(clip, sigma=0.8, tr=1, backend=backend)

The two calls vsjetpack 2.2.6 makes are those of its own plugins, which the drop-ins take
unchanged: ``nl_means`` calls ``backend.NLMeans(clip, h=, d=, a=, s=, channels=, rclip=,
wmode=, wref=, ...)``, KNLMeansCL's arguments, which ``core.avdenoise.NLMeans`` takes; ``bm3d``
calls ``backend.resolve().plugin.BM3Dv2(clip, ref, sigma, ...)`` with a profile's
``block_step``, ``bm_range``, ``radius`` and ``ps_range`` (filtered by the function's
``__signature__``) and ``chroma``, BM3DCUDA's arguments, which ``core.avdenoise.BM3D`` takes
(V-BM3D aggregated in the same call, as BM3Dv2). So this module only adds the device: the
output is that of the drop-in called with the same arguments.

vsjetpack itself refuses two calls on every backend but its CPU plugin (``BM3D.Backend.OLD``):
the VERY_NOISY profile, and bm3d of a clip that is not 32-bit float (convert it with
``vstools.depth(clip, 32)``). This module does not import vsjetpack: it is an optional extra
(``pip install ".[vsjetpack]"`` in the checkout).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from avdenoise_vs import _api
from avdenoise_vs._params import DENOISE_PARAMS
from avdenoise_vs._params.spec import parse_arguments

__all__ = ["Backend", "backend"]

_DEVICE = next(param for param in DENOISE_PARAMS if param.name == "device")
#: What messages about a backend's own settings name (``avdenoise.vsjetpack.Backend: ...``).
_WHERE = "vsjetpack.Backend"


class Backend:
    """A vsjetpack backend that runs avdenoise_vs's filters on `device` (Denoise's values:
    'auto', 'cpu', 'cuda', 'cuda:N').

    A call that chooses the device itself, ``device=`` or ``device_id=`` among vsjetpack's
    keyword arguments, keeps its choice on a backend of device 'auto'; on another, naming
    ``device_id`` as well is an error (the drop-ins take one or the other).
    """

    def __init__(self, device: str = "auto") -> None:
        _api.check_type(_WHERE, _DEVICE, device)
        self.device: str = parse_arguments(_WHERE, (_DEVICE,), {"device": [device]})["device"]
        #: BM3DCUDA's ``BM3Dv2`` as vsjetpack calls it: ``core.avdenoise.BM3D`` on `device`.
        self.BM3Dv2 = _bm3dv2(self._placed)

    def __repr__(self) -> str:
        return f"avdenoise_vs.vsjetpack.Backend(device={self.device!r})"

    __str__ = __repr__

    def NLMeans(self, clip, *args: Any, **kwargs: Any):
        """KNLMeansCL's ``NLMeans`` as vsjetpack calls it: ``core.avdenoise.NLMeans``."""
        return _api.nlmeans(clip, *args, **self._placed(kwargs))

    def resolve(self) -> Backend:
        """vsjetpack's ``BM3D.Backend.resolve``: this backend is resolved already."""
        return self

    @property
    def plugin(self) -> Backend:
        """vsjetpack's ``BM3D.Backend.plugin``, whose ``BM3Dv2`` it calls: this object."""
        return self

    def _placed(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """`kwargs` with this backend's device, unless the call chose one that can stand."""
        chose_id = kwargs.get("device_id") is not None
        if kwargs.get("device") is not None or (chose_id and self.device == "auto"):
            return kwargs
        return {**kwargs, "device": self.device}


def _bm3dv2(placed: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[..., Any]:
    """A function with BM3DCUDA's ``BM3Dv2`` signature (``core.avdenoise.BM3D``'s, which
    vsjetpack filters the profile's settings with) that calls the drop-in."""

    def BM3Dv2(clip, ref=None, sigma=None, **kwargs: Any):
        return _api.bm3d(clip, ref, sigma, **placed(kwargs))

    BM3Dv2.__signature__ = inspect.signature(_api.bm3d)
    BM3Dv2.__doc__ = _api.bm3d.__doc__
    return BM3Dv2


#: The backend of device 'auto': a CUDA GPU where one can run, else the CPU.
backend = Backend()
