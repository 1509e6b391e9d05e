"""How frames cross the bus: an upload and a download strategy, chosen for each backend.

The upload puts each fresh window frame into its device slot (``direct.py``: one
``cudaMemcpy2DAsync`` per plane from VapourSynth's pageable frame; ``staged.py``: NumPy, or
the bridge, copies the frame into one of the thread's page-locked buffers, then one
asynchronous copy). The download brings the output back and releases what the frame held:
straight into the bridge's frame; through the thread's page-locked buffer with Python
copying out; or through that buffer with the bridge's host step (host_step.h) waiting and
copying out without the GIL, so that a staged frame takes the GIL once instead of four times.

The driver serialises pageable copies across threads, so staging wins for large frames,
while its extra host copies cost more than they save for small ones. Measured on an H200
with 16 threads (``scripts/bench/gpu_check.py``, backend alone), frames per second direct /
staged: 1080p 8-bit luma 3224 / 2702, 1080p 4:2:0 8-bit all planes 1621 / 1779, 1080p 16-bit
luma 1962 / 2576, 2160p 8-bit luma 759 / 1016. Under vspipe, 1080p 8-bit luma with a
one-frame window (NLM d=0) ran faster staged in every A/B run (median 2735 fps in six runs
against 2390 direct in four), and with d=1 slower (1825 against 2421-2593), so "auto" stages
frames of 3 MiB or more, and frames of one-frame windows. With the bridge's host step, NLM
Y d=0 under vspipe ran at 5141 and 4975 fps against 3500 and 3310 with Python's copies, in
interleaved runs (docs/BENCHMARKS.md, "Measurements behind design choices").

Gated passes (BM3D) stage their frames: one vspipe process (H200, 16 threads, 1080p) ran BM3D
radius 0 luma at 2376 and 2283 fps staged against 814 and 570 direct, YUV444 604 and 645
against 204 and 177, V-BM3D radius 1 YUV444 506 and 457 against 258 and 231: the driver
serialises one context's pageable copies. Their page-locked buffers come from two pools per
backend (``staged.py``), lent to a frame only while its copies run, so a process page-locks a
few frames' worth rather than a window's per thread, at start-up and again at exit.

GPU clips (VapourSynth's Vulkan frames) cross no bus: their planes are imported device
memory, copied into and out of slots on the device (``device.py``, the "device" transfer).
"""

from __future__ import annotations

import logging

from avdenoise_vs._cuda.transfer.base import Context, Download, Upload
from avdenoise_vs._cuda.transfer.device import DeviceDownload, DeviceUpload
from avdenoise_vs._cuda.transfer.direct import DirectDownload, DirectUpload
from avdenoise_vs._cuda.transfer.staged import BridgeDownload, StagedDownload, StagedUpload
from avdenoise_vs._log import thread_debug

__all__ = [
    "DEVICE",
    "STAGE_MIN_BYTES",
    "TRANSFERS",
    "Context",
    "Download",
    "Upload",
    "choose",
    "setting",
]

logger = logging.getLogger(__name__)

#: The values of ``transfer`` (``AVDENOISE_DEBUG``'s ``transfer`` key); GPU clips take
#: :data:`DEVICE` instead, whatever it says.
TRANSFERS = ("auto", "staged", "direct", "staged-upload", "staged-download")
DEVICE = "device"
#: "auto" stages frames (all planes a pass reads, in the slot's layout) of at least this many
#: bytes, and the frames of one-frame windows, unless the passes are gated (module notes).
STAGE_MIN_BYTES = 3 << 20


def setting(transfer: str) -> str:
    """`transfer`, checked.

    Raises
    ------
    ValueError
        When `transfer` is not one of :data:`TRANSFERS`.
    """
    if transfer not in TRANSFERS:
        raise ValueError(f"transfer must be one of {TRANSFERS}, got {transfer!r}")
    return transfer


def choose(transfer: str, context: Context) -> tuple[str, Upload, Download]:
    """The strategies of a backend: ``(transfer, upload, download)``, "auto" resolved from
    the frame's size, its window and whether its passes are gated (module notes); `transfer`
    is one of :data:`TRANSFERS`, or :data:`DEVICE` for GPU clips.

    Staged downloads leave the wait and the copies out to the bridge; gated frames return
    their output buffer to the gate first, so the bridge only copies them out.
    """
    if transfer == DEVICE:
        return transfer, DeviceUpload(context), DeviceDownload(context)
    if transfer == "auto":
        transfer = _auto(context)
    staged_up = transfer in ("staged", "staged-upload")
    upload = StagedUpload(context) if staged_up else DirectUpload(context)
    if transfer not in ("staged", "staged-download"):
        download = DirectDownload(context)
    elif context.gate is None:
        download = BridgeDownload(context)
    else:
        download = StagedDownload(context)
    thread_debug(
        logger, "avdenoise: transfer %s: %s, %s", transfer, type(upload).__name__,
        type(download).__name__,
    )  # fmt: skip
    return transfer, upload, download


def _auto(context: Context) -> str:
    """What "auto" means for `context` (module notes)."""
    if context.gate is not None:
        return "staged"
    large = context.slots.nbytes >= STAGE_MIN_BYTES
    return "staged" if large or context.window == 1 else "direct"
