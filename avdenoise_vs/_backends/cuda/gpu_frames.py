"""The CUDA backend's frames of GPU clips: VapourSynth's Vulkan frames imported into CUDA, never
copied through the host.

For a GPU clip the bridge hands each frame over as exported planes (``_native/gpu_frames.h``).
:meth:`GpuFrames.process` imports them (``_cuda/vkimport.py``: the device addresses of the
window's planes and of the fresh output frame's), queues the device copies of the planes that
no pass writes (an exported frame may not share its planes with the output, so the bridge
leaves them to the plan), and runs the backend's frame (``CudaBackend.bridge_process``) on
those addresses with the "device" transfer (``_cuda/transfer/device.py``): slots filled and the
output written on the device, then a wait for the stream, so that the frame goes back to
VapourSynth finished. Nothing here runs for CPU clips.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from avdenoise_vs._cuda.transfer.base import D2D
from avdenoise_vs._cuda.vkimport import Imports
from avdenoise_vs._log import thread_debug
from avdenoise_vs._params.settings import untouched_planes

__all__ = ["GpuFrames", "plane_extents", "untouched"]

logger = logging.getLogger(__name__)


def plane_extents(layout) -> tuple[tuple[int, int], ...]:
    """``(row bytes, rows)`` of every plane of `layout`'s frames."""
    itemsize = layout.dtype.itemsize
    return tuple(
        (layout.plane_shape(p)[1] * itemsize, layout.plane_shape(p)[0])
        for p in range(layout.num_planes)
    )


def untouched(layout, passes) -> tuple[tuple[int, int, int], ...]:
    """``(plane, row bytes, rows)`` of every plane that no pass writes (the plan's
    ``copy_planes``), which the output copies from the centre frame of the clip."""
    extents = plane_extents(layout)
    return tuple((p, *extents[p]) for p in untouched_planes(layout, passes))


class GpuFrames:
    """The frame path of a backend whose clip is a GPU clip.

    Parameters
    ----------
    frame : callable
        The backend's ``bridge_process``, on planes as device addresses.
    thread_state : callable
        The calling thread's state (its stream), made on its first frame with the device
        current.
    runtime : module
        ``cupy.cuda.runtime``, for the copies and the wait of a failed frame.
    imports : Imports
        The imported allocations of the backend's device.
    through : tuple
        :func:`untouched`'s planes.
    """

    def __init__(
        self, frame: Callable, thread_state: Callable, runtime, imports: Imports, through: tuple
    ) -> None:
        self._frame, self._thread_state = frame, thread_state
        self._runtime, self.imports, self._through = runtime, imports, through

    def process(self, n: int, frame_numbers: tuple, windows: tuple, dst: tuple) -> None:
        """One frame of the bridge's protocol for GPU clips: done on the device when it
        returns (see the module notes)."""
        state = self._thread_state()
        windows, dst, leases = self.imports.frame(windows, dst)
        try:
            if self._through:
                self._copy_through(windows[0][len(frame_numbers) // 2], dst, state.stream_ptr)
            self._frame(n, frame_numbers, windows, dst)  # waits for its stream
        except BaseException:
            self._wait(state.stream_ptr)  # nothing may still use the imports given back
            raise
        finally:
            self.imports.release(leases)

    def close(self) -> None:
        """The filter is gone: drop the imports."""
        self.imports.close()

    def _copy_through(self, centre: tuple, dst: tuple, stream: int) -> None:
        """Queue the copies of the untouched planes, which the frame's wait covers."""
        copy = self._runtime.memcpy2DAsync
        for plane, row_bytes, rows in self._through:
            source, source_stride, _ = centre[plane]
            address, stride, _ = dst[plane]
            copy(address, stride, source, source_stride, row_bytes, rows, D2D, stream)

    def _wait(self, stream: int) -> None:
        try:
            self._runtime.streamSynchronize(stream)
        except self._runtime.CUDARuntimeError as error:  # the original error matters more
            thread_debug(logger, "avdenoise: stream synchronize after an error failed: %s", error)
