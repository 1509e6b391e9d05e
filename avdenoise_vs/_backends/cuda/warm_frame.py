"""The synthetic frame of a CUDA backend's warm-up (``CudaBackend.warm_up``)."""

from __future__ import annotations

import numpy as np

from avdenoise_vs._params.settings import untouched_planes

__all__ = ["WARM_FRAME", "synthetic_frame"]

WARM_FRAME = 1 << 40  # warm-up frames are numbered where no clip reaches


def synthetic_frame(layout, passes, window: int, num_inputs: int, cupy=None):
    """``(frame_numbers, windows, dst, arrays)`` of a frame in the bridge's protocol: zeros,
    in host memory, or on the current device with `cupy` (a GPU clip's backend, whose planes
    are device addresses); `arrays` must outlive the frame.

    Zeros: which kernels run does not depend on the samples, and a fleet of workers starting
    at once should not spend CPU drawing random frames (0.1-0.4 s each).
    """
    arrays = []
    xp = np if cupy is None else cupy

    def plane(p: int):
        array = xp.zeros(layout.plane_shape(p), layout.dtype)
        arrays.append(array)
        if cupy is not None:
            return array.data.ptr, array.strides[0], None
        return array.ctypes.data, array.strides[0], memoryview(array).cast("B")

    # Frame numbers no clip reaches, so that nothing cached under them is ever reused.
    frame_numbers = tuple(range(WARM_FRAME, WARM_FRAME + window))
    windows = tuple(
        tuple(tuple(plane(p) for p in range(layout.num_planes)) for _ in frame_numbers)
        for _ in range(num_inputs)
    )
    through = untouched_planes(layout, passes)
    dst = tuple(None if p in through else plane(p) for p in range(layout.num_planes))
    if cupy is not None:  # the zeros are written on CuPy's stream, the frame reads on another
        cupy.cuda.runtime.deviceSynchronize()
    return frame_numbers, windows, dst, arrays
