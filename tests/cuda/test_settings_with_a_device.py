"""A bad CUDA setting is the error of a CUDA filter whose device is there (a fake CuPy's,
``_fake_cuda.py``); without a device it changes nothing
(``tests/test_cpu_ignores_cuda_settings.py``)."""

from __future__ import annotations

import pytest

from avdenoise_vs._backends.cuda import backend as cuda_backend

from ..fake_cuda_backend import LAYOUT, PASSES
from ._fake_cuda import install


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("AVDENOISE_DEBUG", "bogus", r"AVDENOISE_DEBUG takes key=value items .* got 'bogus'"),
        ("AVDENOISE_DEBUG", "transfer=maybe", r"AVDENOISE_DEBUG: transfer must be"),
        ("AVDENOISE_DEBUG", "bm3d_cache=no", r"AVDENOISE_DEBUG: bm3d_cache must be"),
        ("AVDENOISE_CUDA_SYNC", "sleep", r"AVDENOISE_CUDA_SYNC must be one of"),
    ],
)
def test_bad_setting_fails_the_cuda_backend(monkeypatch, name, value, message):
    install(monkeypatch)
    monkeypatch.delenv("AVDENOISE_DEBUG", raising=False)
    cuda_backend.CudaBackend(PASSES, LAYOUT)  # the fake device runs with good settings
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=message):
        cuda_backend.CudaBackend(PASSES, LAYOUT)
