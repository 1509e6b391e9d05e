"""NumPy views of the frame planes the bridge hands over, without copying."""

from __future__ import annotations

import numpy as np

__all__ = ["plane_array"]


def plane_array(view: tuple[int, int, memoryview], shape: tuple[int, int], dtype: np.dtype):
    """A (height, width) array over one plane of a VapourSynth frame.

    Parameters
    ----------
    view : tuple
        ``(address, stride in bytes, memoryview)`` as the bridge passes each plane; the
        memoryview covers ``stride * height`` bytes and is writable for output planes.
    shape : tuple of int
        (height, width) of the plane.
    dtype : numpy.dtype
        Sample type.

    Notes
    -----
    The array is only valid during the bridge's ``process`` call: VapourSynth frees the frame
    afterwards. Never keep it; copy what must outlive the call.
    """
    _, stride, memory = view
    return np.ndarray(shape, dtype=dtype, buffer=memory, strides=(stride, dtype.itemsize))
