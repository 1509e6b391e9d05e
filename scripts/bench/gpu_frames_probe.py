"""Can a CUDA filter take VapourSynth R81's GPU frames without a trip through the host?

Builds the probe plugin (gpu_frames_probe.c, with the machine's C compiler), then for each case
uploads a test pattern with std.GPUUpload, runs it through gpuprobe.Export, whose frames are
exported to this process as opaque fds, imported into CUDA (cuImportExternalMemory), read with
CuPy and compared with the host frame, then written (the pattern inverted) into an exported
fresh GPU frame that goes back to VapourSynth and comes out of std.GPUDownload, compared again.
Mode 0 synchronizes on the host (waitGPUFrame); mode 1 on the device (the producer timelines
imported with cuImportExternalSemaphore), where the device exports semaphores.

Each step prints one line, ``[OK]``, ``[FAIL]``, ``[INFO]`` or ``[SKIP]``; the last line is
``VERDICT: PASS`` (exit 0) or ``VERDICT: FAIL at <step>: <why>`` (exit 1), with each mode's
result after it. docs/GPU_FRAMES.md explains the API it exercises. Needs VapourSynth R80+ with
a Vulkan 1.4 device; ``--foreign mapped`` checks the VapourSynth side alone on a CPU Vulkan
device (Mesa's lavapipe).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import platform
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

import _gpu_frames_build as build
import _gpu_frames_foreign as foreign
import numpy as np

FORMATS = ("YUV420P8", "YUV444P16", "GRAYS")
HANDLE_TYPES = {0: "none", 1: "OPAQUE_FD", 2: "OPAQUE_WIN32", 4: "OPAQUE_WIN32_KMT"}


class Stop(Exception):
    """A step failed that later steps need."""


class Report:
    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.failure: str | None = None
        self.modes: dict[int, bool] = {}  # whether each synchronization mode passed

    def add(self, status: str, step: str, detail: str) -> None:
        self.rows.append({"status": status, "step": step, "detail": detail})
        print(f"[{status}] {step}: {detail}", flush=True)
        if status == "FAIL" and self.failure is None:
            self.failure = f"{step}: {detail}"

    def stop(self, step: str, detail: str) -> Stop:
        self.add("FAIL", step, detail)
        return Stop(step)


def transform(xp, values, bits: int, is_float: bool):
    """What the foreign side writes: the pattern inverted (exact in every format)."""
    if is_float:
        return xp.negative(values)
    return xp.subtract(xp.asarray((1 << bits) - 1, dtype=values.dtype), values)


def pattern(core, vs, name: str, width: int, height: int, frames: int):
    """A clip whose every sample differs from its neighbours, per frame and plane."""
    fmt = core.get_video_format(getattr(vs, name))
    blank = core.std.BlankClip(format=fmt.id, width=width, height=height, length=frames)

    def fill(n: int, f):
        out = f.copy()
        for p in range(fmt.num_planes):
            plane = np.asarray(out[p])
            y, x = np.mgrid[: plane.shape[0], : plane.shape[1]]
            if fmt.sample_type == vs.FLOAT:
                plane[...] = np.sin(x * 0.003 + y * 0.007 + n * 0.05 + p)
            else:
                plane[...] = (x * 7 + y * 13 + n * 31 + p * 101) % (1 << fmt.bits_per_sample)
        return out

    return blank.std.ModifyFrame(blank, fill), fmt


class Probe:
    """The callback gpuprobe.Export calls per frame, and what it saw."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.expected: list[list[np.ndarray]] = []
        self.input_mismatches: list[str] = []
        self.first_call: dict | None = None
        self.callback = foreign.CALLBACK(self._on_call)

    def _on_call(self, call_ptr, error, error_size) -> int:
        call = call_ptr.contents
        fds = foreign.take_fds(call)
        try:
            self._handle(call, fds)
            return 0
        except BaseException as failure:  # reported to VapourSynth as the frame's error
            text = f"{type(failure).__name__}: {failure}".encode()[: error_size - 1]
            ctypes.memmove(error, text + b"\0", len(text) + 1)
            return 1
        finally:
            foreign.close_left(fds)

    def _describe(self, call) -> dict:
        planes = [call.inputs[p] for p in range(call.num_planes)]
        outputs = [call.outputs[p] for p in range(call.num_planes)]
        return {
            "input memory ids": sorted({p.memory_id for p in planes}),
            "output memory ids": sorted({p.memory_id for p in outputs}),
            "allocation bytes": sorted({p.memory_size for p in planes + outputs}),
            "input offsets": [p.offset for p in planes],
            "strides": [p.stride for p in planes],
            "plane bytes": [p.size for p in planes],
            "input producer semaphores": [bool(p.semaphore) for p in planes],
        }

    def _handle(self, call, fds: dict[int, None]) -> None:
        if self.first_call is None:
            self.first_call = self._describe(call)
        is_float = call.sample_type == 1
        dtype = {1: np.uint8, 2: np.uint16, 4: np.float32}[call.bytes_per_sample]
        stream = self.backend.enter()
        with stream if stream is not None else nullcontext():
            planes = range(call.num_planes)
            inputs = [self.backend.array(call.inputs[p], dtype, fds) for p in planes]
            outputs = [self.backend.array(call.outputs[p], dtype, fds) for p in planes]
            for p in planes if call.mode == 1 else ():
                self.backend.wait(call.inputs[p], stream, fds)
            for p in planes:
                got, want = self.backend.to_host(inputs[p]), self.expected[call.n][p]
                if not np.array_equal(got, want):
                    bad = int(np.count_nonzero(got != want))
                    self.input_mismatches.append(f"frame {call.n} plane {p}: {bad} samples")
            xp = self.backend.cupy if stream is not None else np
            for p in planes:
                outputs[p][...] = transform(xp, inputs[p], call.bits, is_float)
            if call.mode == 1:
                self.backend.signal(call, stream, fds)
            if stream is not None:
                stream.synchronize()


def step_vulkan(core, report: Report) -> dict:
    try:
        devices, info = core.vulkan_devices, core.vulkan_device_info
    except Exception as failure:
        raise report.stop("vulkan device", f"{type(failure).__name__}: {failure}") from None
    report.add("INFO", "vulkan devices", json.dumps(devices))
    report.add("INFO", "vulkan device info", json.dumps(info))
    memory = HANDLE_TYPES.get(info["export_handle_type"], info["export_handle_type"])
    semaphores = HANDLE_TYPES.get(
        info["semaphore_export_handle_type"], info["semaphore_export_handle_type"]
    )
    if not info["export_handle_type"]:
        raise report.stop("memory export", "export_handle_type is 0: exportGPUPlane cannot work")
    report.add("OK", "memory export", f"planes export as {memory}, semaphores as {semaphores}")
    return info


def step_python_api(core, vs, report: Report) -> None:
    """What the Python module gives a GPU frame: residency, and no way to its memory."""
    clip = core.std.BlankClip(format=vs.GRAY8, width=64, height=16, length=1, color=7)
    frame = core.std.GPUUpload(clip).get_frame(0)
    names = [a for a in dir(frame) if any(k in a.lower() for k in ("gpu", "vulkan", "export"))]
    try:
        frame[0]
        outcome = "frame[0] returned a buffer"
    except Exception as failure:
        outcome = f"frame[0] raises {type(failure).__name__}({failure})"
    report.add("INFO", "python api", f"GPU frame attributes {names}; {outcome}")


def step_ours(core, vs, report: Report) -> None:
    """What avdenoise's registered functions do with a GPU clip today."""
    try:
        import avdenoise_vs  # noqa: F401  (registers core.avdenoise in this core)
    except ImportError as failure:
        report.add("SKIP", "avdenoise today", f"avdenoise_vs cannot be imported ({failure})")
        return
    messages: list[str] = []
    handle = core.add_log_handler(lambda kind, text: messages.append(text))
    try:
        clip = core.std.BlankClip(format=vs.GRAYS, width=64, height=64, length=1, color=0.5)
        out = core.avdenoise.Denoise(core.std.GPUUpload(clip), device="cpu")
        out.get_frame(0)
    except Exception as failure:  # informational: the probe goes on
        report.add("INFO", "avdenoise today", f"Denoise(GPU clip) fails: {failure}")
        return
    finally:
        core.remove_log_handler(handle)
    inserted = [m for m in messages if "GPUDownload" in m]
    residency = "GPU" if out.gpu_resident else "CPU"
    report.add(
        "INFO", "avdenoise today", f"Denoise(GPU clip) returns a {residency} clip; log: {inserted}"
    )


def make_backend(kind: str, info: dict, report: Report):
    if kind == "auto":
        kind = "cuda"
        if info.get("unified_memory") and not _cuda_present():
            kind = "mapped"
    try:
        backend = foreign.Cuda(info["uuid"]) if kind == "cuda" else foreign.Mapped()
    except Exception as failure:
        raise report.stop(f"foreign api ({kind})", f"{type(failure).__name__}: {failure}") from None
    if kind == "cuda":
        cupy = backend.cupy
        runtime = [a for a in dir(cupy.cuda.runtime) if "xternal" in a]
        report.add(
            "OK",
            "foreign api (cuda)",
            f"CUDA device {backend.ordinal} matches the Vulkan UUID; driver API "
            f"{backend.driver_version}; CuPy {cupy.__version__}, "
            f"cupy.cuda.runtime external-memory names: {runtime or 'none'}",
        )
    else:
        report.add("OK", "foreign api (mapped)", "test double: mmap of the exported memory files")
    return backend


def _cuda_present() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
        import cupy  # noqa: F401
    except (OSError, ImportError):
        return False
    return True


def run_case(core, vs, probe: Probe, name: str, mode: int, args, report: Report) -> bool:
    step = f"mode {mode} {name}"
    clip, fmt = pattern(core, vs, name, args.width, args.height, args.frames)
    is_float = fmt.sample_type == vs.FLOAT
    probe.expected = [[np.array(f[p]) for p in range(fmt.num_planes)] for f in clip.frames()]
    probe.input_mismatches, probe.first_call = [], None
    probe.backend.forget_semaphores()
    try:
        exported = core.gpuprobe.Export(core.std.GPUUpload(clip), mode=mode)
        out = core.std.GPUDownload(exported)
        wrong = []
        for n, frame in enumerate(out.frames()):
            for p in range(fmt.num_planes):
                want = transform(np, probe.expected[n][p], fmt.bits_per_sample, is_float)
                if not np.array_equal(np.asarray(frame[p]), want):
                    wrong.append(f"frame {n} plane {p}")
    except vs.Error as failure:
        report.add("FAIL", step, str(failure))
        return False
    report.add("INFO", f"{step} planes", json.dumps(probe.first_call))
    if probe.input_mismatches or wrong:
        detail = f"input read through CUDA differs: {probe.input_mismatches}; output: {wrong}"
        report.add("FAIL", step, detail)
        return False
    report.add(
        "OK",
        step,
        f"{args.frames} frames {args.width}x{args.height}: input read through the import equals "
        "the host frame; output written through the import comes back out of GPUDownload exact "
        f"(Export returns a {'GPU' if exported.gpu_resident else 'CPU'} clip)",
    )
    return True


def run(args, report: Report) -> None:
    import vapoursynth as vs

    core = vs.core
    report.add(
        "INFO",
        "versions",
        f"VapourSynth {core.core_version}, API {core.api_version}; Python {platform.python_version()}; "
        f"kernel {platform.release()} (gVisor reports 4.4.0)",
    )
    info = step_vulkan(core, report)
    step_python_api(core, vs, report)
    if not args.skip_ours:
        step_ours(core, vs, report)
    if args.library:
        library, how = args.library.resolve(), "prebuilt, --library"
    else:
        try:
            library, how = build.build(Path(args.build_dir or tempfile.mkdtemp()), args.cc)
        except Exception as failure:
            raise report.stop("build probe plugin", str(failure)) from None
    report.add("OK", "probe plugin", f"{library} ({how})")
    core.std.LoadPlugin(str(library))
    native = ctypes.CDLL(str(library))
    native.probe_call_size.restype = ctypes.c_int64
    if native.probe_call_size() != ctypes.sizeof(foreign.Call):
        raise report.stop("probe abi", "ProbeCall and its ctypes mirror differ in size")
    probe = Probe(make_backend(args.foreign, info, report))
    native.probe_set_callback(probe.callback)
    modes = [0, 1] if info["semaphore_export_handle_type"] else [0]
    if not isinstance(probe.backend, foreign.Cuda):
        modes = [0]
    if 1 not in modes:
        report.add("SKIP", "mode 1", "no semaphore export, or no CUDA: device side sync untested")
    results = {
        m: [run_case(core, vs, probe, f, m, args, report) for f in args.formats] for m in modes
    }
    native.probe_set_callback(None)
    report.add(
        "INFO",
        "imports",
        f"{len(probe.backend.memories)} allocations imported, "
        f"{probe.backend.dedicated_imports} of them only with the dedicated flag",
    )
    for mode, passed in results.items():
        report.modes[mode] = all(passed)
        print(f"RESULT mode {mode}: {'PASS' if all(passed) else 'FAIL'}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="gpu_frames_probe.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--foreign", choices=("auto", "cuda", "mapped"), default="auto")
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), help="VapourSynth presets")
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=1080)
    parser.add_argument("--frames", type=int, default=3)
    parser.add_argument("--cc", help="the C compiler (default: $CC, cc, gcc or clang)")
    parser.add_argument("--build-dir", help="where the plugin is built (default: a temp dir)")
    parser.add_argument("--library", type=Path, help="a plugin built before, instead of building")
    parser.add_argument(
        "--build-only", action="store_true", help="build the plugin into --build-dir and exit"
    )
    parser.add_argument("--skip-ours", action="store_true", help="skip the avdenoise step")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args()
    if args.build_only:
        library, how = build.build(Path(args.build_dir or "."), args.cc)
        print(f"{library} ({how})")
        return 0
    report = Report()
    try:
        run(args, report)
    except Stop:
        pass
    except Exception as failure:  # anything unforeseen still ends in a verdict
        report.add("FAIL", "probe", f"{type(failure).__name__}: {failure}")
    if args.json:
        args.json.write_text(json.dumps(report.rows, indent=1))
    verdict = "PASS" if report.failure is None else f"FAIL at {report.failure}"
    if report.modes:
        verdict += (
            " ("
            + ", ".join(f"mode {m}: {'PASS' if ok else 'FAIL'}" for m, ok in report.modes.items())
            + ")"
        )
    print(f"VERDICT: {verdict}", flush=True)
    return 0 if report.failure is None else 1


if __name__ == "__main__":
    sys.exit(main())
