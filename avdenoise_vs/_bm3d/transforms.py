"""Fixed linear transforms used by the NumPy BM3D reference.

Every transform is an explicit matrix so that the CUDA port can embed the very same constants:
the 2-D transforms act on 8x8 blocks as ``T @ block @ T.T`` and the 1-D transform acts along the
group axis as ``H @ group``.

References
----------
.. [1] K. Dabov, A. Foi, V. Katkovnik and K. Egiazarian, "Image denoising by sparse 3-D
   transform-domain collaborative filtering", IEEE Trans. Image Process. 16(8), 2080-2095,
   2007. doi:10.1109/TIP.2007.901238
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = [
    "BLOCK_SIZE",
    "bior15_matrix",
    "coefficient_std",
    "dct_matrix",
    "forward_2d",
    "forward_matrix",
    "group_transform",
    "haar_matrix",
    "inverse_2d",
    "inverse_matrix",
    "kaiser_window",
]

#: Side of the square blocks, fixed at 8 as in the "normal profile" of [1]_.
BLOCK_SIZE = 8

# Analysis low-pass of the biorthogonal 1.5 wavelet (Haar synthesis with five vanishing moments),
# in units of 1/(128*sqrt(2)), for taps at offsets -4..5 around each sample pair (2k, 2k+1).
_BIOR15_LOWPASS = np.array([3, -3, -22, 22, 128, 128, 22, -22, -3, 3]) / (128 * np.sqrt(2))
_HAAR_LOWPASS = np.array([1.0, 1.0]) / np.sqrt(2)


@functools.cache
def dct_matrix(n: int = BLOCK_SIZE) -> np.ndarray:
    """Return the orthonormal DCT-II matrix of size ``n`` (rows are basis vectors)."""
    k = np.arange(n)[:, None]
    i = np.arange(n)[None, :]
    m = np.sqrt(2.0 / n) * np.cos(np.pi * (2 * i + 1) * k / (2 * n))
    m[0] /= np.sqrt(2.0)
    m.flags.writeable = False
    return m


def _periodic_level(m: int, lowpass: np.ndarray) -> np.ndarray:
    """One level of a periodic two-channel analysis bank on ``m`` samples.

    Rows ``0..m/2-1`` hold the low-pass outputs, rows ``m/2..m-1`` the Haar high-pass
    outputs ``(x[2k] - x[2k+1]) / sqrt(2)``. The low-pass is centred on the same pair, with
    the taps wrapped modulo ``m``.
    """
    half = m // 2
    level = np.zeros((m, m))
    first_tap = -(len(lowpass) // 2 - 1)
    for k in range(half):
        for t, c in enumerate(lowpass):
            level[k, (2 * k + first_tap + t) % m] += c
        level[half + k, 2 * k] = 1 / np.sqrt(2)
        level[half + k, 2 * k + 1] = -1 / np.sqrt(2)
    return level


def _dyadic_matrix(n: int, lowpass: np.ndarray) -> np.ndarray:
    """Full dyadic decomposition of length ``n`` (a power of two), rows in wavedec order."""
    t = np.eye(n)
    size = n
    while size > 1:
        t[:size] = _periodic_level(size, lowpass) @ t[:size]
        size //= 2
    t.flags.writeable = False
    return t


@functools.cache
def bior15_matrix(n: int = BLOCK_SIZE) -> np.ndarray:
    """Return the periodic, fully decomposed Bior1.5 analysis matrix of size ``n``.

    It is the 2-D transform of the hard-thresholding stage in [1]_. It is not orthonormal:
    rows have norms near (not at) one and are slightly correlated, which
    :func:`coefficient_std` accounts for.
    """
    return _dyadic_matrix(n, _BIOR15_LOWPASS)


@functools.cache
def haar_matrix(n: int) -> np.ndarray:
    """Return the orthonormal, fully decomposed Haar matrix of size ``n`` (a power of two).

    Row 0 is the group mean times ``sqrt(n)`` (the DC); ``n = 1`` gives ``[[1.0]]``.
    """
    return _dyadic_matrix(n, _HAAR_LOWPASS)


@functools.cache
def kaiser_window(n: int = BLOCK_SIZE, beta: float = 2.0) -> np.ndarray:
    """Return the separable 2-D Kaiser window that weights block estimates in aggregation."""
    w = np.outer(np.kaiser(n, beta), np.kaiser(n, beta))
    w.flags.writeable = False
    return w


@functools.cache
def coefficient_std(matrix_key: str) -> np.ndarray:
    """Return the 8x8 standard deviation of each 2-D coefficient under unit white noise.

    For a separable transform ``T @ B @ T.T`` the coefficient ``(i, j)`` is a fixed linear
    combination of the pixels with weights ``T[i, p] * T[j, q]``, so its standard deviation is
    ``||T[i]|| * ||T[j]||``; it is exactly one for an orthonormal ``T``.
    """
    norms = np.linalg.norm(_MATRICES[matrix_key](), axis=1)
    std = np.outer(norms, norms)
    std.flags.writeable = False
    return std


_MATRICES = {"dct": dct_matrix, "bior1.5": bior15_matrix}


def forward_matrix(matrix_key: str) -> np.ndarray:
    """Return the 8x8 matrix ``T`` of a 2-D transform (``"dct"`` or ``"bior1.5"``)."""
    return _MATRICES[matrix_key]()


def inverse_matrix(matrix_key: str) -> np.ndarray:
    """Return the exact inverse of :func:`forward_matrix` (its transpose when orthonormal)."""
    return _inverse(matrix_key)


def forward_2d(blocks: np.ndarray, matrix_key: str) -> np.ndarray:
    """Apply the 2-D transform to the last two axes of ``blocks`` (any leading shape)."""
    t = _MATRICES[matrix_key]()
    return t @ blocks @ t.T


def inverse_2d(coefs: np.ndarray, matrix_key: str) -> np.ndarray:
    """Invert :func:`forward_2d` on the last two axes of ``coefs``."""
    t_inv = _inverse(matrix_key)
    return t_inv @ coefs @ t_inv.T


@functools.cache
def _inverse(matrix_key: str) -> np.ndarray:
    """Return the exact inverse of a 2-D transform matrix (its transpose when orthonormal)."""
    inv = np.linalg.inv(_MATRICES[matrix_key]())
    inv.flags.writeable = False
    return inv


def group_transform(group: np.ndarray, inverse: bool = False) -> np.ndarray:
    """Apply the 1-D Haar transform along axis 1 of ``group`` with shape ``(n, size, ...)``."""
    n, size = group.shape[:2]
    h = haar_matrix(size)
    flat = group.reshape(n, size, -1)
    out = (h.T if inverse else h) @ flat
    return out.reshape(group.shape)
