"""The driver calls that keep the GIL (``_cuda/_calls.py``) against CuPy's own.

Skipped without CuPy or without a CUDA device.
"""

from __future__ import annotations

import numpy as np
import pytest

from ._gpu import require_cuda

cupy = require_cuda()

from avdenoise_vs._cuda.calls import HeldCalls, KernelArgs  # noqa: E402

pytestmark = pytest.mark.gpu

__all__: list[str] = []

_SOURCE = r"""
struct Args { float *out; float value; int count; };
extern "C" __global__ void fill(const Args args) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < args.count) args.out[i] = args.value + i;
}
"""
_RECORD = np.dtype([("out", np.int64), ("value", np.float32), ("count", np.int32)], align=True)


def test_launch_event_and_wait_run_on_the_stream() -> None:
    calls = HeldCalls()
    function = cupy.RawKernel(_SOURCE, "fill").kernel
    out = cupy.zeros(1000, dtype=cupy.float32)
    record = np.zeros(1, dtype=_RECORD)
    record["out"], record["value"], record["count"] = out.data.ptr, 2.5, out.size
    first, second = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    done = cupy.cuda.Event(block=False, disable_timing=True)

    calls.launch(function.ptr, (4, 1, 1), (256, 1, 1), 0, first.ptr, KernelArgs(record))
    calls.eventRecord(done.ptr, first.ptr)
    calls.streamWaitEvent(second.ptr, done.ptr, 0)
    copy = cupy.empty_like(out)
    with second:
        copy[...] = out  # ordered after the kernel by the event only
    second.synchronize()
    np.testing.assert_array_equal(copy.get(), 2.5 + np.arange(1000, dtype=np.float32))
    assert calls.event_done(done.ptr)  # the work before the record is finished


def test_failed_launch_raises_with_the_driver_s_error_name() -> None:
    function = cupy.RawKernel(_SOURCE, "fill").kernel
    record = np.zeros(1, dtype=_RECORD)
    with pytest.raises(RuntimeError, match=r"cuLaunchKernel failed: CUDA_ERROR_"):
        # 4096 threads per block is over every device's limit
        HeldCalls().launch(function.ptr, (1, 1, 1), (4096, 1, 1), 0, 0, KernelArgs(record))
