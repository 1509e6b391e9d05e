"""How a BM3D pass turns its frames into launches: the schedule protocol and spatial BM3D.

A :class:`TemporalSchedule` decides, for each output frame, which groups to filter into which
accumulators and in what order; ``Bm3dPass`` picks one at creation and hands it every frame.
Spatial BM3D (``radius = 0``, :class:`SpatialSchedule`) is three to five launches per frame on
the calling thread's stream: load the frame into float planes, hard thresholding into int64
accumulators, finish into basic estimates, Wiener filtering, finish into the output buffer.
V-BM3D (``radius > 0``) shares work between output frames: ``_bm3d/cuda/vbm3d_schedule.py``.
"""

from __future__ import annotations

from typing import Any, Protocol

from avdenoise_vs._bm3d.cuda.args import Bm3dRecords
from avdenoise_vs._bm3d.cuda.workspace import Lease, Workspace
from avdenoise_vs._cuda.calls import KernelArgs

__all__ = ["Launcher", "SpatialSchedule", "TemporalSchedule"]


class Launcher(Protocol):
    """What a schedule launches through (``Bm3dPass``)."""

    records: Bm3dRecords
    run_hard: bool  # the hard-thresholding stage runs (no ref clip as its pilot)
    run_wiener: bool
    #: Float frames may hold NaN or infinities: bm3d_finish then reads the finished frame's
    #: slot (src[0][0]) for the pixels that no group reached. Integer frames never need it.
    finish_reads_source: bool
    calls: Any  # ``cuda_calls()``, once the kernels are loaded

    def run(self, name: str, args: KernelArgs, stream: int) -> None:
        """Launch kernel `name` (one of ``BM3D_KERNELS``) on `stream`."""


class TemporalSchedule(Protocol):
    """The order of one pass's launches, and the state frames share."""

    def equip(self, ws: Workspace) -> None:
        """Prepare a new workspace (called once, when it is allocated)."""

    def start(self) -> None:
        """Make the shared state, once the kernels are loaded."""

    def frame(self, lease: Lease, numbers: tuple, slots: list, ref_slots: list, out_ptr: int,
              stream: int) -> None:  # fmt: skip
        """Queue the work of the output frame at the centre of `numbers` on `stream`: window
        frames `numbers`, their clip and ref slots, the output buffer at `out_ptr`."""

    def abandon(self, lease: Lease) -> None:
        """After a failed frame: release what it claimed and never made."""

    def forget(self, numbers) -> None:
        """Drop the shared state of frames `numbers` (warm-up frames)."""

    def produced(self) -> dict[str, int]:
        """Shared work made so far, by kind."""

    def memory_bytes(self) -> int:
        """Device memory of the shared state."""


class SpatialSchedule:
    """Radius 0: each frame on its own, in its workspace's accumulator, with the argument
    records of its launches built once per workspace (only the frame's slots and output buffer
    change from frame to frame)."""

    def __init__(self, launcher: Launcher) -> None:
        self._launcher = launcher

    def equip(self, ws: Workspace) -> None:
        """The argument records of a spatial frame, by launch (see :meth:`frame`)."""
        records = self._launcher.records
        frame = dict(noisy_at=[ws.noisy], pilot_at=[ws.pilot], acc_at=[ws.acc], clear=1)
        made = {
            "load": records.record(**frame),
            "hard": records.stage("bm3d_hard", **frame),
            "basic": records.record(to_pilot=1, dst=ws.pilot, **frame),
            "wiener": records.stage("bm3d_wiener", **frame),
            "out": records.record(**frame),
        }
        ws.spatial = {launch: KernelArgs(record) for launch, record in made.items()}

    def start(self) -> None:
        """Nothing is shared between spatial frames."""

    def frame(self, lease: Lease, numbers: tuple, slots: list, ref_slots: list, out_ptr: int,
              stream: int) -> None:  # fmt: skip
        """One frame: load, stage(s), finish."""
        launcher = self._launcher
        records = lease.workspace.spatial
        slot = slots[0]
        records["load"].record["src"][0, :, 0] = slot, ref_slots[0]
        records["out"].record["out"] = out_ptr
        if launcher.finish_reads_source:
            records["basic"].record["src"][0, 0, 0] = slot
            records["out"].record["src"][0, 0, 0] = slot
        launcher.run("bm3d_load", records["load"], stream)
        if launcher.run_hard:
            launcher.run("bm3d_hard", records["hard"], stream)
            if launcher.run_wiener:
                launcher.run("bm3d_finish", records["basic"], stream)
        if launcher.run_wiener:
            launcher.run("bm3d_wiener", records["wiener"], stream)
        launcher.run("bm3d_finish", records["out"], stream)

    def abandon(self, lease: Lease) -> None:
        """A spatial frame claims nothing that others wait for."""

    def forget(self, numbers) -> None:
        """No frame leaves anything behind."""

    def produced(self) -> dict[str, int]:
        """No shared work."""
        return {}

    def memory_bytes(self) -> int:
        """No shared state."""
        return 0
