"""Frames already on the device: VapourSynth's GPU frames, imported (``_cuda/vkimport.py``).

The bridge's planes are then device addresses (``(address, stride, None)``, the importer's
translation of the exported planes), so a fresh window frame goes into its slot, and the
output into the exported planes of the fresh GPU frame, with one device-to-device
``cudaMemcpy2DAsync`` per plane: microseconds at the device's bandwidth, against the bus
crossings of the host frames. The kernels read and write slots as for host frames.

The frame goes back to VapourSynth finished: the download waits for the stream (the host
synchronised mode of docs/GPU_FRAMES.md), which also covers the copies of passed-through
planes that the GPU frame path queued before (``_backends/cuda/gpu_frames.py``).
"""

from __future__ import annotations

from avdenoise_vs._cuda.buffers import ThreadState
from avdenoise_vs._cuda.transfer.base import D2D, Context, Download
from avdenoise_vs._cuda.transfer.direct import DirectUpload

__all__ = ["DeviceDownload", "DeviceUpload"]


class DeviceUpload(DirectUpload):
    """Each plane of a fresh window frame from VapourSynth's device memory into its slot."""

    def __init__(self, context: Context) -> None:
        super().__init__(context, kind=D2D)


class DeviceDownload(Download):
    """Each written plane from the output buffer into the GPU frame's exported plane, then a
    wait for the stream."""

    def download(self, state: ThreadState, dst: tuple, entries, leases, out):
        """See :meth:`.base.Download.download`; returns None: `dst` is done."""
        stream = state.stream_ptr
        try:
            copy, out_ptr = self._runtime.memcpy2DAsync, state.out_ptr
            for plane, offset, pitch, row_bytes, rows in self._planes:
                address, stride, _ = dst[plane]
                copy(address, stride, out_ptr + offset, pitch, row_bytes, rows, D2D, stream)
            if self._sleep:  # gated frames wait asleep (see Download._sleep_until_done)
                self._sleep_until_done(state)
            else:
                self._runtime.streamSynchronize(stream)
        except BaseException:
            self.abort(state, entries, leases, out)
            raise
        self._release(entries, leases, out, complete=True)
        return None
