"""The package's exception classes (``_errors.py``): builtin bases, context kept, picklable.

(``test_argument_errors.py`` checks the messages that bad arguments give in VapourSynth.)
"""

from __future__ import annotations

import pickle

import pytest

from avdenoise_vs._backends import select as _backends
from avdenoise_vs._errors import BackendUnavailable, CudaError

ERRORS = [
    BackendUnavailable("no CUDA device found"),
    BackendUnavailable("the CPU backend cannot load", backend="cpu"),
    CudaError(
        "avdenoise: cuLaunchKernel failed: CUDA_ERROR_ILLEGAL_ADDRESS", "cuLaunchKernel", 700
    ),
    CudaError("avdenoise: waited 300 s for (0, 5) from another thread"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda error: str(error)[:40])
def test_round_trip_through_pickle_keeps_type_message_and_context(error) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert vars(copy) == vars(error)
    assert isinstance(copy, RuntimeError)


def test_context_is_in_attributes() -> None:
    error = CudaError("avdenoise: cuEventRecord failed: X", "cuEventRecord", 400)
    assert (error.call, error.status) == ("cuEventRecord", 400)
    assert BackendUnavailable("no CUDA device found").backend == "cuda"


def test_backend_selection_catches_the_shared_class() -> None:
    """``_backends`` and ``_cuda._device`` (which raises it for the CUDA backend) use the one
    class of ``_errors``."""
    from avdenoise_vs._backends.cuda import device as _device

    assert _backends.BackendUnavailable is BackendUnavailable
    assert _device.BackendUnavailable is BackendUnavailable


def test_failed_driver_call_raises_cuda_error() -> None:
    """``HeldCalls._fail`` names the call and the driver's error name, keeping the status."""
    from avdenoise_vs._cuda.calls import HeldCalls

    calls = HeldCalls.__new__(HeldCalls)  # no driver here: only the error path

    def error_name(status, name) -> int:
        name._obj.value = b"CUDA_ERROR_LAUNCH_FAILED"
        return 0

    calls._error_name = error_name
    with pytest.raises(
        CudaError, match="avdenoise: cuLaunchKernel failed: CUDA_ERROR_LAUNCH_FAILED"
    ):
        calls._fail("cuLaunchKernel", 719)
