"""Opening the CUDA device a backend runs on, and fitting its passes to that device.

Everything that decides whether a device can serve a backend lives here, and raises
:class:`~avdenoise_vs._errors.BackendUnavailable` when it cannot: CuPy missing or failing to
load, no usable driver, no such device, or a pass that needs more shared memory per block
than the device has. Importing this module never imports CuPy.
"""

from __future__ import annotations

import os

from avdenoise_vs import _exit_guard
from avdenoise_vs._cuda.calls import set_sync_mode
from avdenoise_vs._cuda.context import start_early_context
from avdenoise_vs._cuda.placement import device_for_process
from avdenoise_vs._environment import CudaTuning, default
from avdenoise_vs._errors import BackendUnavailable
from avdenoise_vs._params.settings import Bm3dSettings, PassSettings

__all__ = ["DEVICES_IN_USE", "device_number", "new_pass", "open_device", "shared_limit",
           "wait_mode"]  # fmt: skip

#: Devices that backends of this process run on (see ``CudaBackend.bridge_process``).
DEVICES_IN_USE: set[int] = set()


def open_device(device_index: int | None, sync: str):
    """CuPy and the device number to run on, the device's context started meanwhile.

    Raises BackendUnavailable without CuPy, without a usable driver or without that device.
    """
    # One hardware queue unless the user chose: contexts then start faster when an Av1an
    # fleet starts them all at once (see _environment.py). The driver reads it when the
    # context is created, so before CuPy first touches the device; a process whose context
    # already exists (another plugin's) keeps its setting.
    connections = "CUDA_DEVICE_MAX_CONNECTIONS"
    os.environ.setdefault(connections, default(connections))
    early = start_early_context(device_index, lambda ordinal: set_sync_mode(ordinal, sync))
    try:
        try:
            import cupy
        except Exception as error:  # ImportError, or CUDA libraries that fail to load
            raise BackendUnavailable(f"CuPy cannot be imported ({error})") from error
        _exit_guard.put_first()  # ahead of CuPy's atexit callbacks, registered at its import
        # Placement chose in the early context's thread already, if it ran; else it does now.
        return cupy, device_number(cupy, device_for_process(device_index))
    except BackendUnavailable as error:
        if early is None:
            raise
        early.release()
        if early.failure is None:
            raise
        raise BackendUnavailable(error.reason, error.backend, early.failure) from error


def device_number(cupy, device_index: int | None) -> int:
    """The device to run on, checked against the devices CuPy sees."""
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as error:
        raise BackendUnavailable(f"no usable CUDA driver ({error})") from error
    if count == 0:
        raise BackendUnavailable("no CUDA device found")
    device_id = cupy.cuda.runtime.getDevice() if device_index is None else device_index
    if not 0 <= device_id < count:
        raise BackendUnavailable(f"there is no CUDA device {device_id} ({count} found)")
    return device_id


def wait_mode(sync: str, passes: tuple[PassSettings, ...]) -> str:
    """How the process's threads wait for the device: the user's ``AVDENOISE_CUDA_SYNC``, or
    for ``auto`` with a BM3D pass, asleep until the GPU is done.

    An Av1an fleet's CPU is shared by every worker's source and filters, and a BM3D frame
    waits long for the GPU: 16 workers x 240 frames of V-BM3D radius 1 ran 274 and 282 fps
    asleep against 179 and 278 yielding between polls, BM3D radius 0 660-682 against 595-685
    (H200, docs/BENCHMARKS.md: "Transfers and wait modes in a fleet"). The first CUDA filter
    of a process decides, since the flags belong to its context.
    """
    if sync == "auto" and any(isinstance(options, Bm3dSettings) for options in passes):
        return "block"
    return sync


def shared_limit(runtime, device_id: int) -> int:
    """Shared memory per block that kernels on the device may opt in to, in bytes."""
    attribute = runtime.cudaDevAttrMaxSharedMemoryPerBlockOptin
    return runtime.deviceGetAttribute(attribute, device_id)


def new_pass(
    options: PassSettings, layout, offsets, pitches, shared_bytes: int, device_id,
    tuning: CudaTuning,
):  # fmt: skip
    """The GPU pass object of one :data:`PassSettings`: NLM or BM3D (with `tuning`'s
    workspaces and accumulators).

    Raises BackendUnavailable when the device lacks the shared memory the pass needs
    (`shared_bytes` per block, :func:`shared_limit`).
    """
    if isinstance(options, Bm3dSettings):
        from avdenoise_vs._bm3d.cuda.bm3d_pass import MAX_PLANE_SIDE, Bm3dPass

        npass = Bm3dPass(
            options, layout, offsets, pitches, shared_limit=shared_bytes,
            workspaces=tuning.bm3d_workspaces, accumulators=tuning.bm3d_cache,
        )  # fmt: skip
        if max(layout.width, layout.height) > MAX_PLANE_SIDE:
            raise BackendUnavailable(f"BM3D planes are at most {MAX_PLANE_SIDE} pixels a side")
        needed = npass.shared_needed
        setting = f"bm_range={options.bm_range} with radius={options.radius}"
    else:
        from avdenoise_vs._nlm.cuda.nlm_pass import NlmPass, choose_tile_height

        probe = NlmPass(options, layout, offsets, offsets, pitches, 32)
        tile_height = choose_tile_height(probe.spec, shared_bytes)
        if tile_height is not None:
            return NlmPass(options, layout, offsets, offsets, pitches, tile_height)
        npass, needed = None, shared_bytes + 1
        setting = f"search_radius={options.search_radius} with patch_radius={options.patch_radius}"
    if needed > shared_bytes:
        raise BackendUnavailable(
            f"{setting} needs more shared memory per block than device {device_id} has "
            f"({shared_bytes} bytes)"
        )
    return npass
