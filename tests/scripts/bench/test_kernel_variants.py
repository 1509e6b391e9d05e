"""``scripts/bench/bm3d_kernel_variants.py`` patches lines of the BM3D device code to split a
kernel's time: each line it cuts must still be in the code, or its variants time nothing."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from avdenoise_vs._bm3d.cuda.source import _device_code

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "bench" / "bm3d_kernel_variants.py"
spec = importlib.util.spec_from_file_location("bm3d_kernel_variants", SCRIPT)
variants = importlib.util.module_from_spec(spec)
spec.loader.exec_module(variants)


@pytest.mark.parametrize("cut", sorted(variants.CUTS))
def test_each_cut_line_is_in_the_device_code_once(cut):
    old, new = variants.CUTS[cut]
    assert _device_code().count(old) == 1
    assert new != old
