"""The host image of the BM3D kernels' argument struct, checked against the C source.

``bm3d_args_dtype`` (``avdenoise_vs/_bm3d/cuda/args.py``) must lay out ``struct Bm3dArgs``
(bm3d_common.cuh) byte for byte: the kernels read the record NumPy builds. The struct is
parsed from the shipped source and laid out by C's rules (each member at the next multiple
of its alignment, the size a multiple of the largest), so that neither side can drift alone.
No GPU needed.
"""

from __future__ import annotations

import ctypes
import re
from importlib import resources

import numpy as np
import pytest

from avdenoise_vs._bm3d.cuda.args import bm3d_args_dtype
from avdenoise_vs._cuda.calls import KernelArgs

__all__: list[str] = []

#: The C scalar types the struct uses: (NumPy type, size = alignment on CUDA's 64-bit ABI).
_C_TYPES = {"long long": (np.int64, 8), "double": (np.float64, 8)}
_DECLARATION = re.compile(r"(long long|double)\s+(.+)")
_DECLARATOR = re.compile(r"(\w+)((?:\[\w+\])*)")


def _struct_members(window: int) -> list[tuple[str, type, tuple[int, ...]]]:
    """``(name, NumPy type, shape)`` of each member of ``struct Bm3dArgs``, in order."""
    text = resources.files("avdenoise_vs._bm3d.cuda").joinpath("bm3d_common.cuh").read_text()
    body = re.search(r"struct Bm3dArgs \{(.*?)\n\};", text, re.S).group(1)
    body = re.sub(r"//[^\n]*", "", body)
    members = []
    for statement in filter(None, (s.strip() for s in body.split(";"))):
        ctype, declarators = _DECLARATION.fullmatch(" ".join(statement.split())).groups()
        for declarator in declarators.split(","):
            name, dims = _DECLARATOR.fullmatch(declarator.strip()).groups()
            shape = tuple(window if d == "BM_T" else int(d) for d in re.findall(r"\[(\w+)\]", dims))
            members.append((name, _C_TYPES[ctype][0], shape, _C_TYPES[ctype][1]))
    return members


def _c_layout(members) -> tuple[list[int], int]:
    """Offsets of `members` and the struct's size by C's layout rules."""
    offsets, at, largest = [], 0, 1
    for _, _, shape, align in members:
        at = -(-at // align) * align
        offsets.append(at)
        at += align * int(np.prod(shape, dtype=np.int64))
        largest = max(largest, align)
    return offsets, -(-at // largest) * largest


@pytest.mark.parametrize("window", [1, 3, 5, 63])
def test_args_dtype_matches_the_c_struct(window):
    members = _struct_members(window)
    offsets, size = _c_layout(members)
    dtype = bm3d_args_dtype(window)
    assert list(dtype.names) == [name for name, *_ in members]
    for (name, scalar, shape, _), offset in zip(members, offsets, strict=True):
        field, field_offset = dtype.fields[name][:2]
        assert (field.base.type, field.shape, field_offset) == (scalar, shape, offset), name
    assert dtype.itemsize == size


def test_the_parser_sees_every_member():
    """The parse above is only a check if it finds the members: spot-check a few."""
    members = {name: shape for name, _, shape, _ in _struct_members(3)}
    assert members["src"] == (2, 3) and members["sigma"] == (3,) and members["peak"] == ()
    assert len(members) == 24


def test_kernel_args_point_at_their_record() -> None:
    record = np.zeros(1, dtype=[("a", np.int64), ("b", np.float32)])
    args = KernelArgs(record)
    pointers = (ctypes.c_void_p * 1).from_address(args.address)
    assert pointers[0] == record.ctypes.data
