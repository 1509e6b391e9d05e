"""The maths of BM3D that both backends share: the opponent colour space, each channel's noise
level, the block-matching thresholds, the aggregation window and the 2D transforms the stages
use (their matrices are ``transforms.py``).

References
----------
.. [1] K. Dabov, A. Foi, V. Katkovnik and K. Egiazarian, "Image denoising by sparse 3D
   transform-domain collaborative filtering", IEEE Trans. Image Processing 16(8), 2080-2095,
   2007. doi:10.1109/TIP.2007.901238
.. [2] K. Dabov, A. Foi, V. Katkovnik and K. Egiazarian, "Color image denoising via sparse 3D
   collaborative filtering with grouping constraint in luminance-chrominance space", Proc. IEEE
   Int. Conf. Image Processing (ICIP), I-313-I-316, 2007. doi:10.1109/ICIP.2007.4378954
"""

from __future__ import annotations

import numpy as np

from avdenoise_vs._params.options import Distance
from avdenoise_vs._params.settings import Bm3dSettings

__all__ = [
    "KAISER_BETA",
    "OPP",
    "OPP_INVERSE",
    "OPP_NOISE",
    "SPATIAL_GROUP_SIZES",
    "TAU_HT",
    "TAU_HT_MARGIN",
    "TAU_WIENER",
    "TEMPORAL_GROUP_SIGMA",
    "TEMPORAL_GROUP_SIZES",
    "TEMPORAL_GROUP_STEP",
    "TRANSFORM_HT",
    "TRANSFORM_WIENER",
    "bm3d_sigmas",
    "group_sizes",
    "ht_match_threshold",
]

#: RGB to the opponent colour space of CBM3D [2]_ (rows: luminance, red-blue, green-magenta),
#: as the Tampere ``bm3d`` package uses it. White RGB noise of deviation sigma has deviation
#: ``sigma * OPP_NOISE[c]`` in channel c (the rows' lengths), which each channel's thresholds
#: take. Its luminance, the mean of R, G and B, is what blocks are matched on: against the
#: orthonormal version of the matrix (rows scaled to unit length, one sigma for all channels)
#: it scored 0.03-0.11 dB more at sigma 25-50 on scikit-image's colour pictures
#: (docs/BM3D_QUALITY.md).
OPP = np.array([[1 / 3, 1 / 3, 1 / 3], [1 / 2, 0.0, -1 / 2], [1 / 4, -1 / 2, 1 / 4]])
OPP_INVERSE = np.linalg.inv(OPP)
OPP_NOISE = np.linalg.norm(OPP, axis=1)

#: Block-distance thresholds on ``||a - b||^2 / 64`` in 8-bit units (``mismatch_scale``
#: multiplies them). Hard thresholding: ``max(TAU_HT, TAU_HT_MARGIN + 2 sigma^2)``, see
#: :func:`ht_match_threshold`. Wiener: ``TAU_WIENER``, as in [1]_ (matching on the
#: basic estimate).
TAU_HT = 2500.0
TAU_HT_MARGIN = 1250.0
TAU_WIENER = 400.0
#: Most blocks per group (``N_2``) of the hard-thresholding and Wiener stages: [1]_'s 16 and 32,
#: and the smaller groups of a temporal window at low noise (:func:`group_sizes`).
SPATIAL_GROUP_SIZES = (16, 32)
TEMPORAL_GROUP_SIZES = (8, 16)
#: Noise deviation (8-bit units) and reference-block spacing up to which a temporal window
#: takes TEMPORAL_GROUP_SIZES.
TEMPORAL_GROUP_SIGMA = 20.0
TEMPORAL_GROUP_STEP = 4
#: Kaiser window parameter for aggregation, as in [1]_.
KAISER_BETA = 2.0
#: 2-D transforms as in [1]_: Bior1.5 for hard thresholding (about 0.15 dB better than the
#: DCT there in our tests), DCT for the Wiener stage (better than Bior1.5 there).
TRANSFORM_HT = "bior1.5"
TRANSFORM_WIENER = "dct"


def bm3d_sigmas(options: Bm3dSettings) -> tuple[float, ...]:
    """The noise deviation of each channel a BM3D pass filters (8-bit units).

    RGB passes filter in :data:`OPP`, where white noise of deviation ``strength`` in each RGB
    plane has ``strength * OPP_NOISE[c]`` in channel c; other passes take ``plane_strengths``.
    The first is the one blocks are matched with.
    """
    if options.distance is Distance.RGB:
        return tuple(float(options.strength * norm) for norm in OPP_NOISE)
    return options.plane_strengths


def group_sizes(window: int, sigma: float, block_step: int) -> tuple[int, int]:
    """Most blocks per group of the hard-thresholding and the Wiener stage, for a temporal
    window of `window` frames (``2 radius + 1``), noise `sigma` (8-bit units, of the channel
    blocks are matched on, as for :func:`ht_match_threshold`) and reference blocks
    `block_step` pixels apart.

    One frame keeps [1]_'s 16 and 32. A window holds close matches of most blocks in its
    other frames, and on a dense grid of reference blocks (step 4 at most, where every pixel
    gets many groups' estimates) up to sigma 20 smaller groups of them, 8 and 16, denoise
    better: on pans and zooms over scikit-image's pictures at radius 1 they scored 0.31 dB
    more on average at sigma 5, 0.26 at 10 and 0.07 at 20, and they halve every group's
    transforms and aggregation. Noisier blocks need larger groups again (at sigma 40, 8 and
    16 scored 0.19 dB less on average), and so do sparse grids (step 6 and 8: as good on
    average, worse on smooth pictures); docs/BENCHMARKS.md, "V-BM3D group sizes".
    """
    if window > 1 and sigma <= TEMPORAL_GROUP_SIGMA and block_step <= TEMPORAL_GROUP_STEP:
        return TEMPORAL_GROUP_SIZES
    return SPATIAL_GROUP_SIZES


def ht_match_threshold(sigma: float) -> float:
    """Distance threshold of the hard-thresholding stage for noise ``sigma``.

    Two noisy copies of one block are ``2 sigma^2`` apart on average, so a fixed threshold
    rejects nearly every match as sigma grows: the paper's 2500 (up to sigma 40) lies below that
    3200 at sigma 40. the paper switches above sigma 40 to 5000 with a 2-D hard-threshold
    pre-filter before matching; on our test crops that lost 0.4-0.6 dB against the Tampere
    ``bm3d`` at sigma 50-60 (smooth images lost 1.3 dB) and 0.2 dB more at sigma 40 than a
    threshold that follows the noise. So the margin above the noise-only distance is kept
    constant instead, with no pre-filter: this equals the paper's 2500 up to sigma 25 and gives
    4450 at sigma 40 and 6250 at sigma 50 (final PSNR within 0.2 dB of Tampere's on average).
    """
    return max(TAU_HT, TAU_HT_MARGIN + 2.0 * sigma * sigma)
