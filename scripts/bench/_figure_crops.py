"""Before/after crops for the docs: the sample clip clean, noisy, and through NLM and BM3D;
and scikit-image's astronaut through each at several strengths.

The clip is the demo's (``avdenoise_vs.sample.noisy_sample``: a real picture panning, with
seeded white Gaussian noise), in RGB24 so that the picture needs no conversion to be shown.
Only a crop and a margin around it are denoised, through VapourSynth and
``core.avdenoise.Denoise`` as a script would call it; the margin keeps the filters' frame
borders out of the picture. PSNR is of the crop's three planes against the clean crop.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from avdenoise_vs.sample import MAX_LENGTH, noisy_sample, psnr, sample_frames

__all__ = [
    "DEFAULT_CROP",
    "FACE",
    "STRENGTH_STEPS",
    "Crop",
    "CropPanel",
    "denoise_crops",
    "strength_panels",
    "strip",
    "strip_size",
    "write_crops",
    "write_strengths",
]

ZOOM = 2
"""Nearest-neighbour magnification, so that single pixels of noise stay visible."""
GAP = 8
PAD = 8
LABEL_HEIGHT = 24
FONT_SIZE = 14


@dataclass(frozen=True)
class Crop:
    """A window of one frame of the sample clip, in that frame's pixels, and the margin
    denoised around it.

    The default margin is past NLM's reach (patch radius 4 + search radius 2) and BM3D's
    8-pixel blocks, so that the borders, where the filters see zeros or fewer blocks, stay
    outside the window.
    """

    frame: int
    x: int
    y: int
    width: int
    height: int
    margin: int = 12

    def check(self, frame_width: int, frame_height: int) -> None:
        """ValueError unless the window and its margin lie inside the frame and the clip."""
        if not 0 <= self.frame <= MAX_LENGTH - 2:
            # The clip runs one frame past this one: NLM's window (radius 1) has real frames
            # on both sides.
            raise ValueError(f"frame must be from 0 to {MAX_LENGTH - 2}, got {self.frame}")
        m = self.margin
        if self.x - m < 0 or self.y - m < 0 or self.width <= 0 or self.height <= 0:
            raise ValueError(f"{self} does not fit in the frame with its margin")
        if self.x + self.width + m > frame_width or self.y + self.height + m > frame_height:
            raise ValueError(f"{self} does not fit in a {frame_width}x{frame_height} frame")


#: The launch pad at the foot of the rocket (frame 46: gantry, a light, cloud, and sky): edges,
#: fine lattice and flat areas in one window.
DEFAULT_CROP = Crop(frame=46, x=152, y=168, width=128, height=136)


@dataclass(frozen=True)
class CropPanel:
    """One panel of the strip: its label, its pixels (height, width, 3) uint8, its PSNR."""

    label: str
    pixels: np.ndarray
    psnr: float | None


def _rgb(clip, frame: int, margin: int) -> np.ndarray:
    """Frame ``frame`` of an RGB24 clip as (height, width, 3) uint8, less ``margin`` each side."""
    f = clip.get_frame(frame)
    planes = np.stack([np.asarray(f[p]) for p in range(3)], axis=-1)
    return planes[margin : planes.shape[0] - margin, margin : planes.shape[1] - margin].copy()


def denoise_crops(
    crop: Crop = DEFAULT_CROP,
    *,
    sigma: float = 8.0,
    nlm_strength: float = 5.0,
    bm3d_strength: float = 8.0,
    device: str = "cpu",
) -> list[CropPanel]:
    """The four panels: clean, noisy, NLM and BM3D, each denoiser at its defaults but strength.

    ``sigma`` is the noise's deviation in 8-bit codes. NLM's strength does best somewhat below
    the deviation (README, 'Strength': 5 to 6 at sigma 8); BM3D's is the deviation itself.
    """
    import vapoursynth as vs

    core = vs.core
    height, width = sample_frames(1)[0].shape[:2]
    crop.check(width, height)
    clean, noisy = noisy_sample(core, length=crop.frame + 2, format_id=vs.RGB24, sigma=sigma)
    m = crop.margin
    window = {
        "left": crop.x - m,
        "top": crop.y - m,
        "right": clean.width - crop.x - crop.width - m,
        "bottom": clean.height - crop.y - crop.height - m,
    }
    clean, noisy = core.std.Crop(clean, **window), core.std.Crop(noisy, **window)
    nlm = core.avdenoise.Denoise(noisy, strength=nlm_strength, device=device)
    bm3d = core.avdenoise.Denoise(noisy, algorithm="bm3d", strength=bm3d_strength, device=device)
    reference = _rgb(clean, crop.frame, m)
    panels = [CropPanel("clean (the reference)", reference, None)]
    for label, clip in (
        (f"noisy, sigma {sigma:g}", noisy),
        (f"NLM, strength {nlm_strength:g}", nlm),
        (f"BM3D, strength {bm3d_strength:g}", bm3d),
    ):
        pixels = _rgb(clip, crop.frame, m)
        panels.append(CropPanel(label, pixels, psnr(pixels, reference, 255.0)))
    return panels


def strip_size(panels: int, width: int, height: int) -> tuple[int, int]:
    """(width, height) in pixels of the strip of ``panels`` crops of width x height."""
    return (
        2 * PAD + panels * ZOOM * width + (panels - 1) * GAP,
        2 * PAD + LABEL_HEIGHT + ZOOM * height,
    )


def strip(panels: list[CropPanel]) -> Image.Image:
    """The panels side by side at ZOOM x, each under its label and PSNR, on white."""
    height, width = panels[0].pixels.shape[:2]
    image = Image.new("RGB", strip_size(len(panels), width, height), "white")
    draw = ImageDraw.Draw(image)
    # Pillow >= 10.1 ships a scalable font, so the labels need no font installed.
    font = ImageFont.load_default(size=FONT_SIZE)
    for i, panel in enumerate(panels):
        x = PAD + i * (ZOOM * width + GAP)
        label = panel.label if panel.psnr is None else f"{panel.label}: {panel.psnr:.2f} dB"
        draw.text((x, PAD + 2), label, fill=(31, 35, 40), font=font)
        zoomed = Image.fromarray(panel.pixels).resize(
            (ZOOM * width, ZOOM * height), Image.Resampling.NEAREST
        )
        image.paste(zoomed, (x, PAD + LABEL_HEIGHT))
    return image


def write_crops(path: Path, crop: Crop = DEFAULT_CROP, **options: float | str) -> list[CropPanel]:
    """Denoise ``crop`` (``options`` as denoise_crops') and write the strip to ``path`` (PNG)."""
    panels = denoise_crops(crop, **options)
    path.parent.mkdir(parents=True, exist_ok=True)
    strip(panels).save(path, optimize=True)
    return panels


#: The strengths of the strength figure, in 8-bit codes; 0 stands for no denoising at all.
STRENGTH_STEPS = (0.0, 2.0, 4.5, 7.0, 12.0)
#: The astronaut's face and hair (scikit-image's ``astronaut``, NASA, public domain): skin,
#: fine hair and the edges of the eyes, where too much strength shows first.
FACE = (178, 60, 96)
_PAN = (2, 3)


def _pan_clip(core, frames: list[np.ndarray]):
    """An RGB24 clip of (height, width, 3) uint8 frames."""
    import vapoursynth as vs

    height, width = frames[0].shape[:2]
    blank = core.std.BlankClip(width=width, height=height, format=vs.RGB24, length=len(frames))

    def fill(n: int, f):
        out = f.copy()
        for p in range(3):
            np.asarray(out[p])[...] = frames[n][..., p]
        return out

    return core.std.ModifyFrame(blank, blank, fill)


def strength_panels(
    window: tuple[int, int, int] = FACE,
    *,
    sigma: float = 7.0,
    strengths: tuple[float, ...] = STRENGTH_STEPS,
    margin: int = 12,
    device: str = "cpu",
) -> list[list[CropPanel]]:
    """Two rows of panels of scikit-image's astronaut with white Gaussian noise of ``sigma``:
    NLM, then BM3D, at each strength (Denoise's other defaults, RGB), strength 0 being the
    noisy input in the first row and the clean picture in the second.

    ``window`` is (x, y, side) in the picture. The picture pans (2, 3) pixels a frame over
    three frames, so that NLM's radius 1 matches real motion; the middle frame is shown.
    """
    import vapoursynth as vs
    from skimage import data

    x, y, side = window
    picture, rng = data.astronaut(), np.random.default_rng(46)
    (dy, dx), m = _PAN, margin
    clean = [picture[y - m + n * dy : y + side + m + n * dy,
                     x - m + n * dx : x + side + m + n * dx] for n in range(3)]  # fmt: skip
    noisy = [np.clip(np.rint(f + rng.normal(0.0, sigma, f.shape)), 0, 255).astype(np.uint8)
             for f in clean]  # fmt: skip
    core = vs.core
    clip, reference = _pan_clip(core, noisy), clean[1][m:-m, m:-m]
    shown = noisy[1][m:-m, m:-m]
    rows = [
        [CropPanel(f"noisy, sigma {sigma:g}", shown, psnr(shown, reference, 255.0))],
        [CropPanel("clean", reference, None)],
    ]
    for row, algorithm in zip(rows, ("nlm", "bm3d"), strict=True):
        for h in (h for h in strengths if h > 0):
            out = core.avdenoise.Denoise(clip, algorithm=algorithm, strength=h, device=device)
            pixels = _rgb(out, 1, m)
            label = f"{algorithm.upper()} {h:g}"
            row.append(CropPanel(label, pixels, psnr(pixels, reference, 255.0)))
    return rows


def write_strengths(path: Path, **options) -> list[list[CropPanel]]:
    """Draw strength_panels' rows (``options`` as its) one under the other into ``path``."""
    rows = strength_panels(**options)
    strips = [strip(row) for row in rows]
    image = Image.new("RGB", (strips[0].width, sum(s.height for s in strips)), "white")
    for i, s in enumerate(strips):
        image.paste(s, (0, i * strips[0].height))
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, optimize=True)
    return rows
