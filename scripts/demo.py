"""The main job: denoise the sample clip through vspipe, report PSNR before/after and fps.

Run by scripts/demo.sh inside the project's virtual environment.
"""

from __future__ import annotations

import argparse
import re
import runpy
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def read_y4m(data: bytes) -> list[list[np.ndarray]]:
    """Planes of every frame of an 8-bit 4:2:0 y4m stream."""
    header, _, body = data.partition(b"\n")
    width = int(re.search(rb" W(\d+)", header).group(1))
    height = int(re.search(rb" H(\d+)", header).group(1))
    sizes = [(height, width), (height // 2, width // 2), (height // 2, width // 2)]
    frames, pos = [], 0
    while pos < len(body):
        pos = body.index(b"\n", pos) + 1  # skip "FRAME...\n"
        planes = []
        for h, w in sizes:
            planes.append(np.frombuffer(body, np.uint8, h * w, pos).reshape(h, w))
            pos += h * w
        frames.append(planes)
    return frames


def render(vspipe: str, output: str, out_path: Path, length: int, device: str) -> tuple[float, str]:
    """Render one output of the sample script with vspipe; return (seconds, vspipe's stderr)."""
    command = [vspipe, str(HERE / "sample.vpy"), "-c", "y4m", str(out_path)]
    for key, value in (("output", output), ("length", length), ("device", device)):
        command += ["-a", f"{key}={value}"]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"vspipe failed:\n{done.stderr}")
    return time.perf_counter() - start, done.stderr.strip()


def backend_of(length: int, device: str) -> str:
    """The backend the sample script's denoiser runs on: its frames' AvdenoiseBackend property.

    vspipe's y4m output carries no frame properties, so the script is evaluated here too, with
    the same arguments, and its first frame asked.
    """
    import vapoursynth as vs

    args = {"output": "denoised", "length": str(length), "device": device}
    runpy.run_path(str(HERE / "sample.vpy"), init_globals=args)
    frame = vs.get_output(0).clip.get_frame(0)
    vs.clear_outputs()
    return frame.props["AvdenoiseBackend"]


def mean_psnr(frames: list, reference: list) -> float:
    from avdenoise_vs.sample import psnr

    # strict: a clip cut short (a vspipe that died midway) must not score on fewer frames.
    return float(np.mean([psnr(f[0], r[0], 255.0) for f, r in zip(frames, reference, strict=True)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vspipe", default="vspipe")
    parser.add_argument("--length", type=int, default=24)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--out", type=Path, default=Path("out"))
    args = parser.parse_args()
    args.out.mkdir(exist_ok=True)
    clips = {}
    for output in ("clean", "noisy", "denoised"):
        path = args.out / f"sample-{output}.y4m"
        seconds, log = render(args.vspipe, output, path, args.length, args.device)
        clips[output] = read_y4m(path.read_bytes())
        if output == "denoised":
            print(f"vspipe: {log}")
            print(f"wrote {path} ({len(clips[output])} frames, {seconds:.1f} s with start-up)")
    before = mean_psnr(clips["noisy"], clips["clean"])
    after = mean_psnr(clips["denoised"], clips["clean"])
    fps = re.search(r"\(([\d.]+) fps\)", log)
    print(f"luma PSNR before {before:.2f} dB, after {after:.2f} dB (+{after - before:.2f} dB)")
    backend = backend_of(args.length, args.device)
    print(f"backend: {backend} (device={args.device})")
    print(f"denoise speed: {fps.group(1) if fps else '?'} fps (vspipe, {backend})")
    if after <= before:
        sys.exit("denoising did not raise PSNR")


if __name__ == "__main__":
    main()
