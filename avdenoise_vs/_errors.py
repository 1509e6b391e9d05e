"""The package's own exceptions: few, with their context as attributes, and picklable.

Each subclasses the builtin that callers already catch (``except RuntimeError`` keeps
working) and defines ``__reduce__``: an exception pickles as its class and ``args``, which
would drop the attributes (or fail, for keyword-only ones) when it crosses a process
boundary, such as a warm-up worker's failure reported to its parent. Errors about the
user's values are ``ValueError`` / ``TypeError`` / ``NotImplementedError`` (``_params/``),
never one of these.
"""

from __future__ import annotations

__all__ = ["BackendUnavailable", "CudaError", "one_line"]


def one_line(error: BaseException) -> str:
    """`error` in one line, for logs and reports: its type and its message's first line (an
    import error or an NVRTC log can run to pages)."""
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


class BackendUnavailable(RuntimeError):
    """A backend cannot run here: no CuPy, no CUDA device, or a device too small for a pass.

    ``device='auto'`` skips such a backend; asked for by name, it is the filter's error.

    Parameters
    ----------
    reason : str
        Why, as the message shows it ("no CUDA device found").
    backend : str, optional
        The backend's name, ``"cuda"`` by default.
    detail : str, optional
        What only a filter that asked for this backend by name says beside the reason (why
        the NVIDIA driver failed): ``device='auto'`` falls back without it.

    Examples
    --------
    >>> import pickle
    >>> error = pickle.loads(pickle.dumps(BackendUnavailable("no CUDA device found")))
    >>> str(error), error.backend
    ('no CUDA device found', 'cuda')
    """

    def __init__(self, reason: str, backend: str = "cuda", detail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.backend = backend
        self.detail = detail

    def __reduce__(self):
        return type(self), (self.reason, self.backend, self.detail)


class CudaError(RuntimeError):
    """A CUDA call of the frame path failed, or a frame could not use what another thread
    prepares on the GPU.

    Kernel compile failures are CuPy's ``CompileException``, which already keeps the
    kernel's name, options and source.

    Parameters
    ----------
    message : str
        The whole message, ``avdenoise: `` prefix included.
    call : str or None, optional
        The driver entry point that failed (``"cuLaunchKernel"``), or None when the error is
        not one call's.
    status : int or None, optional
        The driver's ``CUresult``, or None.

    Examples
    --------
    >>> import pickle
    >>> error = CudaError("avdenoise: cuLaunchKernel failed: X", "cuLaunchKernel", 700)
    >>> copy = pickle.loads(pickle.dumps(error))
    >>> str(copy), copy.call, copy.status
    ('avdenoise: cuLaunchKernel failed: X', 'cuLaunchKernel', 700)
    """

    def __init__(self, message: str, call: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.call = call
        self.status = status

    def __reduce__(self):
        return type(self), (self.message, self.call, self.status)
