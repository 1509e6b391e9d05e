"""The denoisers that ``bm3d_quality.py`` scores: one :class:`Backend` each, in :data:`BACKENDS`.

The NumPy reference and the Tampere package are called on arrays; the VapourSynth plugins get
clips built from the arrays and give arrays back (see ``bm3d_quality.py`` for the protocol
each is called with).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from avdenoise_vs._bm3d.reference.bm3d import bm3d
from avdenoise_vs._bm3d.reference.vbm3d import FrameList, vbm3d

__all__ = ["BACKENDS", "OPP", "Backend"]

log = logging.getLogger("bm3d_quality")

# OPP colour transform of CBM3D (Dabov et al., ICIP 2007).
OPP = np.array([[1 / 3, 1 / 3, 1 / 3], [1 / 2, 0, -1 / 2], [1 / 4, -1 / 2, 1 / 4]])
#: Device of the avdenoise backends (--device).
AVDENOISE_DEVICE = "cuda"


def _available() -> str | None:
    return None


@dataclass(frozen=True)
class Backend:
    """A denoiser under test.

    Attributes
    ----------
    about : str
        One line for the report.
    image : callable
        ``image(noisy, sigma)``: ``noisy`` is ``H x W`` or RGB ``H x W x 3`` in 8-bit scale;
        returns the estimate in the same layout.
    video : callable or None
        ``video(frames, n, sigma, radius)``: the estimate of frame ``n`` of a clip of grey
        frames; None if unsupported.
    unavailable : callable
        Returns why the backend cannot run here, or None when it can.
    """

    about: str
    image: Callable[[np.ndarray, float], np.ndarray]
    video: Callable[[list[np.ndarray], int, float, int], np.ndarray] | None
    unavailable: Callable[[], str | None] = _available


def _reference_image(noisy: np.ndarray, sigma: float) -> np.ndarray:
    """NumPy reference: grey BM3D, or CBM3D in OPP with per-channel sigma."""
    if noisy.ndim == 2:
        return bm3d([noisy], 0, sigma)
    opp = np.einsum("ij,hwj->ihw", OPP, noisy)
    est = bm3d([opp], 0, sigma * np.linalg.norm(OPP, axis=1), joint=True)
    return np.einsum("ij,jhw->hwi", np.linalg.inv(OPP), est)


def _reference_video(frames: list[np.ndarray], n: int, sigma: float, radius: int) -> np.ndarray:
    """The clip-level V-BM3D of ``Denoise`` (two stages); radius 0 is spatial BM3D."""
    return vbm3d(FrameList(frames), n, sigma, radius=radius)[0]


def _tampere_image(noisy: np.ndarray, sigma: float) -> np.ndarray:
    """Tampere ``bm3d`` 4.x, profile "np" (``bm3d_rgb`` in its OPP space for colour)."""
    import bm3d as tampere  # optional dependency, imported only when asked for

    if noisy.ndim == 2:
        return tampere.bm3d(noisy / 255, sigma / 255, "np") * 255
    return tampere.bm3d_rgb(noisy / 255, sigma / 255, "np") * 255


def _tampere_unavailable() -> str | None:
    try:
        import bm3d as tampere  # noqa: F401
    except ImportError as error:
        return f"the bm3d package cannot be imported ({error})"
    return None


# --- VapourSynth backends -------------------------------------------------------------------
# A pipeline maps (core, noisy float32 clip, sigma per plane in 8-bit units, radius, chroma)
# to the denoised clip; `chroma` says the clip holds OPP planes as YUV444PS (CBM3D).
Pipeline = Callable[..., object]


def _vs():
    import vapoursynth

    return vapoursynth


def _vs_core():
    """VapourSynth's core, with the avdenoise bridge of an editable install loaded."""
    import avdenoise_vs  # noqa: F401  (an editable install registers its bridge on import)

    return _vs().core


def _clip(frames: Sequence[Sequence[np.ndarray]], fmt: int):
    """A float32 clip whose frame k holds the planes ``frames[k]`` (8-bit scale) / 255."""
    core = _vs_core()
    height, width = frames[0][0].shape
    blank = core.std.BlankClip(width=width, height=height, format=fmt, length=len(frames))

    def fill(n: int, f):
        out = f.copy()
        for plane, values in enumerate(frames[n]):
            np.asarray(out[plane])[...] = values / 255
        return out

    return core.std.ModifyFrame(blank, blank, fill)


def _run(pipeline: Pipeline, frames, fmt: int, sigma: list[float], radius: int, chroma: bool,
         n: int = 0) -> np.ndarray:  # fmt: skip
    """Frame ``n`` of the pipeline's output, ``C x H x W`` float64 in 8-bit scale."""
    out = pipeline(_vs_core(), _clip(frames, fmt), [float(s) for s in sigma], radius, chroma)
    with out.get_frame(n) as frame:
        planes = [np.asarray(frame[p], dtype=np.float64) for p in range(frame.format.num_planes)]
    return np.stack(planes) * 255


def _vs_backend(about: str, pipeline: Pipeline, colour: str) -> Backend:
    """A backend that goes through VapourSynth clips.

    ``colour`` is "rgb" (the filter takes RGBS and works in its own opponent space) or "opp"
    (the filter gets our OPP planes as YUV444PS with ``chroma=True`` and per-plane sigma).
    """

    def image(noisy: np.ndarray, sigma: float) -> np.ndarray:
        vs = _vs()
        if noisy.ndim == 2:
            return _run(pipeline, [[noisy]], vs.GRAYS, [sigma], 0, False)[0]
        if colour == "rgb":
            out = _run(pipeline, [list(np.moveaxis(noisy, -1, 0))], vs.RGBS, [sigma], 0, False)
            return np.moveaxis(out, 0, -1)
        opp = np.einsum("ij,hwj->ihw", OPP, noisy)
        sigmas = list(sigma * np.linalg.norm(OPP, axis=1))
        out = _run(pipeline, [list(opp)], vs.YUV444PS, sigmas, 0, True)
        return np.einsum("ij,jhw->hwi", np.linalg.inv(OPP), out)

    def video(frames: list[np.ndarray], n: int, sigma: float, radius: int) -> np.ndarray:
        vs = _vs()
        return _run(pipeline, [[f] for f in frames], vs.GRAYS, [sigma], radius, False, n)[0]

    def unavailable() -> str | None:
        """Run the pipeline on a small flat frame; any failure is the reason to skip."""
        try:
            _run(pipeline, [[np.full((32, 32), 128.0)]], _vs().GRAYS, [3.0], 0, False)
        except Exception as error:  # an absent plugin, no GPU, a failed load: all skip
            return f"{type(error).__name__}: {error}"
        return None

    return Backend(about=about, image=image, video=video, unavailable=unavailable)


def _two_calls(function, clip, sigma, radius, chroma, **extra):
    """Basic estimate, then the Wiener stage with it as ``ref``: BM3DCUDA's documented pair.

    The noisy clip is ``clip`` and the basic estimate ``ref`` in both calls, as BM3DCUDA's
    parameter text and vszip's documentation say (its README's ``final`` example has them
    swapped).
    """
    basic = function(clip, sigma=sigma, radius=radius, chroma=chroma, **extra)
    return function(clip, ref=basic, sigma=sigma, radius=radius, chroma=chroma, **extra)


def _avdenoise(core, clip, sigma, radius, chroma):
    """``Denoise(algorithm="bm3d")`` at its defaults; RGB clips go to its opponent space."""
    return core.avdenoise.Denoise(clip, algorithm="bm3d", strength=sigma[0], radius=radius,
                                  device=AVDENOISE_DEVICE)  # fmt: skip


def _avdenoise_bm3d(core, clip, sigma, radius, chroma):
    """The BM3DCUDA drop-in, which aggregates over time inside the call at every radius."""
    return _two_calls(core.avdenoise.BM3D, clip, sigma, radius, chroma, device=AVDENOISE_DEVICE)


def _bm3dcuda(core, clip, sigma, radius, chroma):
    """BM3DCUDA; its ``BM3D`` at radius > 0 returns 2 (2r + 1) stacked frames for a
    ``VAggregate`` to sum, which its ``BM3Dv2`` does within the call."""
    if not hasattr(core, "bm3dcuda"):  # not autoloaded: an API3 plugin kept outside the tree
        path = os.environ.get("BM3DCUDA_PLUGIN")
        if not path:
            raise RuntimeError("BM3DCUDA_PLUGIN is not set (see .device/device_setup.sh)")
        core.std.LoadPlugin(path)
    function = core.bm3dcuda.BM3D if radius == 0 else core.bm3dcuda.BM3Dv2
    return _two_calls(function, clip, sigma, radius, chroma)


def _vszipcu(core, clip, sigma, radius, chroma):
    """vszipcu's ``BM3Dv2`` (BM3D and VAggregate in one call) at its defaults."""
    return _two_calls(core.vszipcu.BM3Dv2, clip, sigma, radius, chroma)


def _vsbm3d(core, clip, sigma, radius, chroma):
    """VapourSynth-BM3D: Basic then Final; for V-BM3D each stage's stacked output (2 (2r + 1)
    frames high) goes through ``VAggregate``, ``sample=1`` keeping float32.

    On grey clips ``matrix=0``: the plugin multiplies sigma by the norm of the luma row of
    ``matrix``, which by default (a YUV matrix chosen by frame size, norm about 0.6) reads sigma
    as the deviation of RGB noise, not of the plane's own (source/BM3D_Base.cpp); GBR's is 1.
    RGB clips always use its OPP matrix, where that scaling is the right one.
    """
    ns = core.bm3d
    extra = {"matrix": 0} if clip.format.color_family == _vs().GRAY else {}
    if radius == 0:
        basic = ns.Basic(clip, sigma=sigma, **extra)
        return ns.Final(clip, basic, sigma=sigma, **extra)
    basic = ns.VBasic(clip, sigma=sigma, radius=radius, **extra)
    basic = ns.VAggregate(basic, radius=radius, sample=1)
    final = ns.VFinal(clip, basic, sigma=sigma, radius=radius, **extra)
    return ns.VAggregate(final, radius=radius, sample=1)


def _on_vulkan(core, function, clip, **args):
    """`function` (a Vulkan rival's) on `clip` moved to VapourSynth's GPU device and back."""
    upload = core.std.GPUUpload
    ref = args.pop("ref", None)
    if ref is not None:
        args["ref"] = upload(clip=ref)
    return core.std.GPUDownload(clip=function(upload(clip=clip), **args))


def _vsfeel(core, clip, sigma, radius, chroma):
    """vapoursynth-feel's ``BM3Dv2`` (BM3DCUDA's signature, aggregated over time inside the
    call) at its defaults, basic then ``ref=basic``, on R80+'s Vulkan device."""
    basic = _on_vulkan(core, core.vsfeel.BM3Dv2, clip, sigma=sigma, radius=radius, chroma=chroma)
    return _on_vulkan(core, core.vsfeel.BM3Dv2, clip, ref=basic, sigma=sigma, radius=radius,
                      chroma=chroma)  # fmt: skip


def _bm3dvk2(core, clip, sigma, radius, chroma):
    """bm3dvk2's ``BM3D`` at its defaults, basic then ``ref=basic``; GRAY or RGB only (RGB
    in its own opponent space)."""
    basic = _on_vulkan(core, core.bm3dvk2.BM3D, clip, sigma=sigma, radius=radius)
    return _on_vulkan(core, core.bm3dvk2.BM3D, clip, ref=basic, sigma=sigma, radius=radius)


BACKENDS: dict[str, Backend] = {
    "reference": Backend(
        about="the NumPy reference (`avdenoise_vs._backends.reference`): defaults block_step 3, "
        "bm_range 19, groups of 16/32 (8/16 for V-BM3D to sigma 20, step 4), lambda 2.7; colour = "
        "CBM3D in OPP; sequences = the clip-level V-BM3D of `vbm3d.py`, two stages",
        image=_reference_image,
        video=_reference_video,
    ),
    "tampere": Backend(
        about='the Tampere `bm3d` package, profile "np" (`bm3d_rgb` for colour)',
        image=_tampere_image,
        video=None,
        unavailable=_tampere_unavailable,
    ),
    "vsbm3d": _vs_backend(
        'VapourSynth-BM3D (CPU) at its defaults (profile "fast") but `matrix=0` on grey '
        "clips (its default matrix scales sigma by about 0.6): `Basic` + `Final`, `VBasic` / "
        "`VFinal` + `VAggregate` for radius > 0; colour as RGB (its own OPP)",
        _vsbm3d,
        "rgb",
    ),
    "avdenoise": _vs_backend(
        '`avdenoise.Denoise(algorithm="bm3d")` at its defaults (as `reference`) on `--device`; '
        "colour as RGB (its orthonormal opponent space)",
        _avdenoise,
        "rgb",
    ),
    "avdenoise_bm3d": _vs_backend(
        "`avdenoise.BM3D` at BM3DCUDA's defaults (block_step 8, bm_range 9) on `--device`, "
        "basic then `ref=basic`; colour as OPP YUV444PS, `chroma=True`",
        _avdenoise_bm3d,
        "opp",
    ),
    "bm3dcuda": _vs_backend(
        "BM3DCUDA at its defaults, basic then `ref=basic` (`BM3Dv2` for radius > 0); colour "
        "as OPP YUV444PS, `chroma=True`",
        _bm3dcuda,
        "opp",
    ),
    "vszipcu": _vs_backend(
        "vszipcu `BM3Dv2` at its defaults, basic then `ref=basic`; colour as OPP YUV444PS, "
        "`chroma=True`",
        _vszipcu,
        "opp",
    ),
    "vsfeel": _vs_backend(
        "vapoursynth-feel `BM3Dv2` (Vulkan, R80+) at its defaults, basic then `ref=basic`; "
        "colour as OPP YUV444PS, `chroma=True`",
        _vsfeel,
        "opp",
    ),
    "bm3dvk2": _vs_backend(
        "bm3dvk2 `BM3D` (Vulkan, R80+) at its defaults, basic then `ref=basic`; colour as RGB "
        "(its own opponent space)",
        _bm3dvk2,
        "rgb",
    ),
}
