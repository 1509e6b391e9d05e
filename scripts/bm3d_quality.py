"""Measure BM3D denoising quality (PSNR, SSIM) on scikit-image's bundled pictures.

Scores BM3D / CBM3D on grey and colour crops with white Gaussian noise, and V-BM3D at each
temporal radius on pan and zoom sequences cut from the grey pictures, for every backend asked
for. Writes a Markdown report and, when matplotlib is installed, a PSNR-versus-sigma plot.

Run from the repository root (the CPU columns, the default backends; about 10 minutes)::

    PYTHONPATH=. python scripts/bm3d_quality.py --size 96

Backends (:data:`BACKENDS`):

reference
    The NumPy reference: :func:`~avdenoise_vs._reference.bm3d.bm3d` for still pictures
    (CBM3D in OPP for colour) and :func:`~avdenoise_vs._reference.vbm3d.vbm3d`, the clip-level
    V-BM3D that ``Denoise`` follows, for sequences (radius 0 is spatial BM3D).
tampere
    The Tampere ``bm3d`` package, profile "np" (``bm3d_rgb`` for colour); still pictures only.
vsbm3d
    VapourSynth-BM3D (``bm3d`` namespace, CPU; ``pip install vapoursynth-bm3d``) at its
    defaults (profile "fast") except ``matrix=0`` on grey clips (see :func:`_vsbm3d`):
    ``Basic`` then ``Final``, or ``VBasic`` / ``VFinal`` each followed by ``VAggregate``.
avdenoise
    ``avdenoise.Denoise(algorithm="bm3d")`` at its defaults (the paper's settings, two stages)
    on ``--device`` (default ``cuda``); should match ``reference``.
avdenoise_bm3d
    ``avdenoise.BM3D`` at BM3DCUDA's defaults on ``--device``: a first call for the basic
    estimate, a second with ``ref`` for the final one, as the two rivals below are called.
bm3dcuda
    BM3DCUDA, loaded from ``$BM3DCUDA_PLUGIN``, at its defaults, two calls likewise; radius > 0
    through ``BM3Dv2`` (``BM3D`` with the temporal aggregation in the same call).
vszipcu
    vszipcu's ``BM3Dv2`` (a port of BM3DCUDA) at its defaults, two calls likewise.

The VapourSynth backends get float32 clips in [0, 1] (GRAYS; RGBS for ``vsbm3d`` and
``avdenoise``, which convert to an opponent colour space themselves; for the BM3DCUDA-style
calls, the OPP planes as YUV444PS with ``chroma=True`` and each plane's noise deviation) and
sigma in 8-bit units, as their documentation asks. A backend that cannot run here (plugin
absent, no GPU) is skipped with the reason logged and written into the report.

The GPU columns come from a second run on the GPU machine that merges the CPU columns of the
committed report instead of recomputing them::

    python3 scripts/bm3d_quality.py --size 96 --merge docs/BM3D_QUALITY.md \\
        --backends avdenoise,avdenoise_bm3d,bm3dcuda,vszipcu --out "$OUT/BM3D_QUALITY.md"

Estimates are clipped to [0, 255] before scoring; the noise is not clipped (the usual AWGN
protocol). Every noise draw has a fixed seed.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from skimage import data
from skimage.metrics import peak_signal_noise_ratio, structural_similarity
from skimage.transform import resize

from avdenoise_vs._reference.bm3d import bm3d
from avdenoise_vs._reference.vbm3d import FrameList, vbm3d

log = logging.getLogger("bm3d_quality")

GREY = ("camera", "moon", "coins")
COLOUR = ("astronaut", "coffee", "chelsea")
# Crop origins chosen on detailed areas; a crop of --size pixels starts here (clamped).
ORIGINS = {
    "camera": (100, 200), "moon": (200, 200), "coins": (80, 100),
    "astronaut": (40, 180), "coffee": (100, 200), "chelsea": (80, 100),
}  # fmt: skip
# OPP colour transform of CBM3D (Dabov et al., ICIP 2007).
OPP = np.array([[1 / 3, 1 / 3, 1 / 3], [1 / 2, 0, -1 / 2], [1 / 4, -1 / 2, 1 / 4]])
PAN_STEP = (1, 2)  # pixels per frame (down, right)
ZOOM_STEP = 0.03  # relative scale change per frame
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


BACKENDS: dict[str, Backend] = {
    "reference": Backend(
        about="the NumPy reference (`avdenoise_vs._reference`): defaults block_step 3, "
        "bm_range 19, groups of 16/32, lambda 2.7; colour = CBM3D in OPP; sequences = the "
        "clip-level V-BM3D of `vbm3d.py`, two stages",
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
}


# --- test material --------------------------------------------------------------------------


def _crop(name: str, size: int) -> np.ndarray:
    """A ``size`` x ``size`` crop of a bundled picture, float64 in [0, 255]."""
    img = getattr(data, name)().astype(np.float64)
    y0 = min(ORIGINS[name][0], img.shape[0] - size)
    x0 = min(ORIGINS[name][1], img.shape[1] - size)
    return img[y0 : y0 + size, x0 : x0 + size]


def _sequence(name: str, motion: str, size: int, reach: int) -> list[np.ndarray]:
    """``2 reach + 1`` clean grey frames: a pan, or a zoom about the crop centre."""
    img = getattr(data, name)().astype(np.float64)
    # Keep every frame inside the picture: the pan travels reach * step pixels and the zoom
    # widens the region by reach * ZOOM_STEP of the size on each side.
    margin = size // 2 + reach * max(PAN_STEP) + int(np.ceil(size * ZOOM_STEP * reach)) + 1
    cy, cx = (
        int(np.clip(o + size // 2, margin, n - margin)) for o, n in zip(ORIGINS[name], img.shape)
    )
    frames = []
    for k in range(-reach, reach + 1):
        if motion == "pan":
            y, x = cy - size // 2 + k * PAN_STEP[0], cx - size // 2 + k * PAN_STEP[1]
            frames.append(img[y : y + size, x : x + size])
        else:
            half = int(round(size * (1 + ZOOM_STEP * k) / 2))
            region = img[cy - half : cy + half, cx - half : cx + half]
            frames.append(resize(region, (size, size), order=3, anti_aliasing=True) * 1.0)
    return frames


def _scores(clean: np.ndarray, est: np.ndarray) -> tuple[float, float]:
    """PSNR and SSIM of an estimate clipped to [0, 255]."""
    est = np.clip(est, 0, 255)
    axis = -1 if clean.ndim == 3 else None
    psnr = peak_signal_noise_ratio(clean, est, data_range=255)
    ssim = structural_similarity(clean, est, data_range=255, channel_axis=axis)
    return float(psnr), float(ssim)


def _noise(shape, sigma: float, seed: int | Sequence[int]) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, sigma, shape)


def run_images(names, sigmas, size, backends) -> list[dict]:
    """Score every backend on every picture and sigma."""
    rows = []
    for ni, name in enumerate(names):
        clean = _crop(name, size)
        if clean.ndim == 3:
            clean = clean[..., :3]
        for sigma in sigmas:
            noisy = clean + _noise(clean.shape, sigma, seed=1000 * ni + int(sigma))
            row = {"image": name, "sigma": sigma, "noisy": _scores(clean, noisy)}
            for b in backends:
                start = time.perf_counter()
                row[b] = _scores(clean, BACKENDS[b].image(noisy, sigma))
                log.info("%s sigma %g %s: %.2f dB (%.1f s)", name, sigma, b, row[b][0],
                         time.perf_counter() - start)  # fmt: skip
            rows.append(row)
    return rows


def video_reach(radii) -> int:
    """Frames needed on each side of the scored one: two stages read ``n - 4r .. n + 4r``."""
    return 4 * max(radii)


def run_videos(names, sigmas, size, radii, backends) -> list[dict]:
    """Score V-BM3D at each radius (0 = spatial) on the centre frame of pan and zoom clips."""
    rows = []
    reach = video_reach(radii)
    for ni, name in enumerate(names):
        for motion in ("pan", "zoom"):
            clean = _sequence(name, motion, size, reach)
            for sigma in sigmas:
                noisy = [c + _noise(c.shape, sigma, seed=(7, ni, k, int(sigma)))
                         for k, c in enumerate(clean)]  # fmt: skip
                row = {"image": name, "motion": motion, "sigma": sigma,
                       "noisy": _scores(clean[reach], noisy[reach])}  # fmt: skip
                for b in backends:
                    if BACKENDS[b].video is None:
                        continue
                    for r in radii:
                        start = time.perf_counter()
                        est = BACKENDS[b].video(noisy, reach, sigma, r)
                        row[b, r] = _scores(clean[reach], est)
                        log.info("%s %s sigma %g %s r=%d: %.2f dB (%.1f s)", name, motion, sigma,
                                 b, r, row[b, r][0], time.perf_counter() - start)  # fmt: skip
                rows.append(row)
    return rows


# --- earlier reports (--merge) --------------------------------------------------------------

_SCORE = re.compile(r"^(-?\d+(?:\.\d+)?) / (-?\d+(?:\.\d+)?)$")


def read_report(path: Path) -> tuple[dict, dict]:
    """The score tables of an earlier report.

    Returns ``({(image, sigma): {backend: score}}, {(image, motion, sigma): {(backend, r):
    score}})``, scores as printed (PSNR to 0.01 dB, SSIM to 0.001); "n/a" cells are left out.
    """
    images: dict = {}
    videos: dict = {}
    header = None
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|"):
            header = None
        elif cells[0] == "image":
            header = cells
        elif header is not None and not set(cells[0]) <= set("-:"):
            video = header[1] == "motion"
            key = (cells[0], cells[1], float(cells[2])) if video else (cells[0], float(cells[1]))
            scores = (videos if video else images).setdefault(key, {})
            for name, cell in zip(header[4 if video else 3 :], cells[4 if video else 3 :]):
                match = _SCORE.match(cell)
                if match:
                    column = (name.split(" r=")[0], int(name.split(" r=")[1])) if video else name
                    scores[column] = (float(match[1]), float(match[2]))
    return images, videos


def report_size(path: Path) -> int | None:
    """The crop size an earlier report scored, from its header."""
    found = re.search(r"crops of (\d+) x", path.read_text())
    return int(found[1]) if found else None


def merge(image_rows, video_rows, path: Path, skip) -> list[str]:
    """Add the columns of an earlier report for backends not in `skip`; returns their names."""
    images, videos = read_report(path)
    added = []
    for rows, table, key in ((image_rows, images, ("image", "sigma")),
                             (video_rows, videos, ("image", "motion", "sigma"))):  # fmt: skip
        for row in rows:
            for column, score in table.get(tuple(row[k] for k in key), {}).items():
                backend = column[0] if isinstance(column, tuple) else column
                if backend in BACKENDS and backend not in skip:
                    row[column] = score
                    added.append(backend)
    return sorted(set(added), key=list(BACKENDS).index)


# --- report ---------------------------------------------------------------------------------


def _cell(score) -> str:
    return "n/a" if score is None else f"{score[0]:.2f} / {score[1]:.3f}"


def _mean_psnr(rows, keys) -> dict[float, list[float | None]]:
    """Mean PSNR over rows for each sigma and key; None where a row lacks the key."""
    sigmas = sorted({r["sigma"] for r in rows})
    means = {}
    for s in sigmas:
        picked = [r for r in rows if r["sigma"] == s]
        means[s] = [float(np.mean([r[k][0] for r in picked])) if all(k in r for r in picked)
                    else None for k in keys]  # fmt: skip
    return means


def _num(value, fmt: str = ".2f") -> str:
    return "n/a" if value is None else format(value, fmt)


def _means_table(rows, keys, labels, base) -> list[str]:
    """Mean PSNR per sigma (a column each) of every key (a row each, headed by its `labels`),
    with its difference to the mean of the key ``base(key)`` in brackets."""
    means = _mean_psnr(rows, keys)
    out = ["| " + " | ".join(labels[0]) + " | " + " | ".join(f"sigma {s:g}" for s in means)
           + " |", "|---" * (len(labels[0]) + len(means)) + "|"]  # fmt: skip
    index = {k: i for i, k in enumerate(keys)}
    for key, label in zip(keys, labels[1:]):
        cells = []
        for values in means.values():
            mean, ref = values[index[key]], values[index[base(key)]]
            diff = "" if key == base(key) or None in (mean, ref) else f" ({mean - ref:+.2f})"
            cells.append(_num(mean) + diff)
        out.append("| " + " | ".join(label) + " | " + " | ".join(cells) + " |")
    return out


def markdown(image_rows, video_rows, backends, radii, args, notes) -> str:
    """Render the report; `notes` are lines for the header (skipped or merged columns)."""
    out = [
        "# BM3D quality",
        "",
        f"Generated by `scripts/bm3d_quality.py {args.command}`: crops of {args.size} x "
        f"{args.size} px from scikit-image's samples, white Gaussian noise (fixed seeds), "
        "estimates clipped to [0, 255]. Cells are PSNR (dB) / SSIM. Backends:",
        "",
        *(f"- `{b}`: {BACKENDS[b].about}" for b in backends),
        "",
        *(line for note in notes for line in (note, "")),  # a paragraph each
        "## Still images",
        "",
        "| image | sigma | noisy | " + " | ".join(backends) + " |",
        "|---|---|---|" + "---|" * len(backends),
    ]
    for r in image_rows:
        cells = [_cell(r.get(b)) for b in backends]
        out.append(
            f"| {r['image']} | {r['sigma']:g} | {_cell(r['noisy'])} | " + " | ".join(cells) + " |"
        )
    out += ["", f"### Mean PSNR (dB), in brackets the difference to `{backends[0]}`", ""]
    labels = [("backend",), *((f"`{b}`",) for b in backends)]
    out += _means_table(image_rows, backends, labels, base=lambda b: backends[0])
    video_backends = [b for b in backends if BACKENDS[b].video is not None]
    if video_rows and video_backends:
        cols = [(b, r) for b in video_backends for r in radii]
        reach = video_reach(radii)
        out += ["", "## Video (V-BM3D)", "",
                f"Clips of {2 * reach + 1} frames: a pan of {PAN_STEP[0]} px down and "
                f"{PAN_STEP[1]} px right per frame, or a zoom of {ZOOM_STEP:.0%} scale change per "
                f"frame (bicubic); the centre frame is scored. With two stages frame n depends on "
                f"frames n - 4r .. n + 4r, so every radius up to {max(radii)} sees full windows "
                "(no clamping at the clip ends). Each frame's estimate aggregates the groups of "
                "every frame of its window, each matched across its own window (V-BM3D over a "
                "clip, `avdenoise_vs/_reference/vbm3d.py`). Radius 0 is spatial BM3D.", "",
                "| image | motion | sigma | noisy | " + " | ".join(f"{b} r={r}" for b, r in cols)
                + " |", "|---|---|---|---|" + "---|" * len(cols)]  # fmt: skip
        for r in video_rows:
            out.append(f"| {r['image']} | {r['motion']} | {r['sigma']:g} | {_cell(r['noisy'])} | "
                       + " | ".join(_cell(r.get(c)) for c in cols) + " |")  # fmt: skip
        base = min(radii)
        out += ["", f"### Mean PSNR (dB), in brackets the gain over r={base}", ""]
        labels = [("backend", "radius"), *((f"`{b}`", str(r)) for b, r in cols)]
        out += _means_table(video_rows, cols, labels, base=lambda key: (key[0], base))
    return "\n".join(out) + "\n"


def plot(image_rows, video_rows, backends, radii, path: Path) -> None:
    """PSNR versus sigma: still-image means per backend, and video means per radius."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed; skipping the plot %s", path)
        return
    fig, axes = plt.subplots(1, 2 if video_rows else 1, figsize=(11 if video_rows else 6, 4))
    axes = np.atleast_1d(axes)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for kind, names in (("grey", GREY), ("colour", COLOUR)):
        rows = [r for r in image_rows if r["image"] in names]
        if not rows:
            continue
        means = _mean_psnr(rows, backends)
        for i, key in enumerate(backends):
            axes[0].plot(list(means), [m[i] for m in means.values()], marker="o",
                         color=colours[i % len(colours)],
                         linestyle="-" if kind == "grey" else "--", label=f"{key} ({kind})")  # fmt: skip
    axes[0].set(title="Still images (mean)", xlabel="sigma", ylabel="PSNR (dB)")
    axes[0].legend(fontsize=7)
    if video_rows:
        video_backends = [b for b in backends if BACKENDS[b].video is not None]
        keys = [(b, r) for b in video_backends for r in radii]
        means = _mean_psnr(video_rows, keys)
        styles = ["-", "--", ":", "-."]
        for i, (b, r) in enumerate(keys):
            axes[1].plot(list(means), [m[i] for m in means.values()], marker="o",
                         color=colours[video_backends.index(b) % len(colours)],
                         linestyle=styles[radii.index(r) % len(styles)], label=f"{b} r={r}")  # fmt: skip
        axes[1].set(title="Pan/zoom clips, centre frame (mean)", xlabel="sigma",
                    ylabel="PSNR (dB)")  # fmt: skip
        axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    log.info("wrote %s", path)


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v]


def main(argv: list[str] | None = None) -> None:
    global AVDENOISE_DEVICE
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )  # fmt: skip
    parser.add_argument("--size", type=int, default=128, help="crop side in pixels")
    parser.add_argument("--sigmas", type=_floats, default=[5, 10, 15, 25, 50])
    parser.add_argument("--video-sigmas", type=_floats, default=[10, 25],
                        help="noise levels for the sequences (empty to skip them)")  # fmt: skip
    parser.add_argument("--radii", type=lambda t: [int(v) for v in t.split(",")], default=[0, 1, 2])
    parser.add_argument("--images", default=",".join(GREY + COLOUR))
    parser.add_argument("--backends", default="reference,tampere,vsbm3d",
                        help=f"comma-separated, from: {', '.join(BACKENDS)}")  # fmt: skip
    parser.add_argument("--device", default="cuda",
                        help="device of the avdenoise backends: cuda, cuda:N or cpu")  # fmt: skip
    parser.add_argument("--merge", type=Path, action="append", default=[],
                        help="an earlier report whose columns of other backends are kept")  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("docs/BM3D_QUALITY.md"))
    parser.add_argument("--plot", type=Path, default=None,
                        help="PNG path (default: --out with suffix .png)")  # fmt: skip
    args = parser.parse_args(argv)
    args.command = shlex.join(argv if argv is not None else sys.argv[1:])
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    AVDENOISE_DEVICE = args.device
    asked = [b for b in args.backends.split(",") if b]
    unknown = sorted(set(asked) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown backends {unknown}; known: {sorted(BACKENDS)}")
    for path in args.merge:  # before the long run, not after it
        if report_size(path) != args.size:
            parser.error(f"{path} scored crops of {report_size(path)} px, not --size {args.size}")
    notes, backends = [], []
    for b in asked:
        reason = BACKENDS[b].unavailable()
        if reason:
            log.warning("skipping %s: %s", b, reason)
            notes.append(f"Skipped `{b}`: {reason}.")
        else:
            backends.append(b)
    start = time.perf_counter()
    names = [n for n in args.images.split(",") if n]
    image_rows = run_images(names, args.sigmas, args.size, backends)
    grey = [n for n in names if n in GREY]
    video_rows = run_videos(grey, args.video_sigmas, args.size, args.radii, backends)
    minutes = (time.perf_counter() - start) / 60
    notes.append(f"This run computed {', '.join(f'`{b}`' for b in backends) or 'nothing'} in "
                 f"{minutes:.1f} min ({os.cpu_count()} CPUs).")  # fmt: skip
    for path in args.merge:
        merged = merge(image_rows, video_rows, path, skip=backends)
        earlier = re.search(r"^This run (computed .*)$", path.read_text(), re.MULTILINE)
        notes.append(f"Columns {', '.join(f'`{b}`' for b in merged)} are copied from an earlier "
                     f"report ({path.name}), as printed there"
                     + (f"; that run {earlier[1]}" if earlier else "."))  # fmt: skip
        backends += [b for b in merged if b not in backends]
    backends.sort(key=list(BACKENDS).index)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(markdown(image_rows, video_rows, backends, args.radii, args, notes))
    log.info("wrote %s (%.1f min)", args.out, minutes)
    plot(image_rows, video_rows, backends, args.radii, args.plot or args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
