"""What the type checker holds each backend to: every backend, and every one of the tests'
stand-ins for one, assigned to the Protocol it implements (``_backends/protocol.py``).

``test_backend_protocol.py`` runs mypy on this file (``[tool.mypy]`` in pyproject.toml): a
backend that lacks a member, or whose member's signature does not fit, fails it. Nothing here
runs: the imports are the type checker's alone (the CUDA backend's module needs no CuPy to be
checked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from avdenoise_vs._backends.cuda.backend import CudaBackend
    from avdenoise_vs._backends.pending import PendingBackend
    from avdenoise_vs._backends.protocol import Backend, CompilingBackend
    from avdenoise_vs._backends.reference import NumpyBackend

    from .cli.test_prewarm import _FakeCuda as PrewarmFakeCuda
    from .fake_cuda_backend import FakeCuda

    def _backends(numpy: NumpyBackend, cuda: CudaBackend, pending: PendingBackend) -> None:
        cpu: Backend = numpy
        gpu: CompilingBackend = cuda
        chosen_later: Backend = pending
        del cpu, gpu, chosen_later

    def _stand_ins(fake: FakeCuda, prewarm_fake: PrewarmFakeCuda) -> None:
        backend: CompilingBackend = fake
        prewarm_backend: CompilingBackend = prewarm_fake
        del backend, prewarm_backend
