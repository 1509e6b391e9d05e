"""Frames straight between VapourSynth's pageable memory and the device.

One ``cudaMemcpy2DAsync`` per plane and direction, through CuPy, which releases the GIL
while the driver copies: from pageable memory the driver stages the rows itself and returns
once they are copied, and it serialises such copies across threads, which is why large
frames are staged instead (``staged.py``; the numbers are in ``__init__.py``).
"""

from __future__ import annotations

from avdenoise_vs._cuda.buffers import ThreadState
from avdenoise_vs._cuda.transfer.base import D2H, H2D, Context, Download

__all__ = ["DirectDownload", "DirectUpload"]


class DirectUpload:
    """Each plane of a fresh window frame straight into its slot (`kind`: from host memory,
    or from the device for ``device.py``)."""

    def __init__(self, context: Context, kind: int = H2D) -> None:
        self._kind = kind
        self._runtime = context.runtime
        self._calls = context.calls
        self._cache = context.cache
        self._copies = context.slots.copies

    def upload(self, fresh: list, frame_numbers: tuple, windows: tuple, base: int, state) -> None:
        """See :meth:`.base.Upload.upload`."""
        copy, record = self._runtime.memcpy2DAsync, self._calls.eventRecord
        stream, kind = state.stream_ptr, self._kind
        for entry in fresh:
            input_index, frame = entry.key
            planes = windows[input_index - base][frame_numbers.index(frame)]
            try:
                slot = entry.slot.ptr
                for plane, offset, pitch, row_bytes, rows in self._copies:
                    address, stride, _ = planes[plane]
                    copy(slot + offset, pitch, address, stride, row_bytes, rows, kind, stream)
                record(entry.slot.event_ptr, stream)
                entry.stream = stream
            except BaseException:
                self._cache.fail(entry)
                raise
            finally:
                entry.issued.set()

    def requests(self, state: ThreadState) -> tuple:
        """No staging buffer for the bridge to fill."""
        return ()


class DirectDownload(Download):
    """Each written plane straight from the output buffer into the bridge's frame."""

    def download(self, state: ThreadState, dst: tuple, entries, leases, out):
        """See :meth:`.base.Download.download`; returns None: `dst` is done."""
        stream = state.stream_ptr
        try:
            if self._sleep:
                self._sleep_until_done(state)
            copy, out_ptr = self._runtime.memcpy2DAsync, state.out_ptr
            for plane, offset, pitch, row_bytes, rows in self._planes:
                address, stride, _ = dst[plane]
                copy(address, stride, out_ptr + offset, pitch, row_bytes, rows, D2H, stream)
        except BaseException:
            self.abort(state, entries, leases, out)
            raise
        # A copy into pageable host memory returns only once it has completed (CUDA's API
        # synchronisation rules), so the stream is idle here: no synchronise call.
        self._release(entries, leases, out, complete=True)
        return None
