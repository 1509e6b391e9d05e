"""NLM speed and quality benchmark: ours against every rival that is installed, in one run.

    python scripts/bench/bench_nlm.py [--cases NAME,...] [--plugins NAME,...] [--seconds 3] [--repeat N]
                                [--append docs/BENCHMARKS.md] [--json out.json]

Each (plugin, case) runs in its own process (so GPU memory is per filter and a crash stays
contained) on a 1080p (or 4K) clip made from a real picture panning across the frame, with
noise added by a native expression: the source costs no Python time, so the numbers measure
the denoisers. fps is timed by vspipe, as users run filters; time to the first frame, PSNR
and GPU memory are measured in the worker process. Equal parameters everywhere (d, a, s, h, channels); vsavd takes only the
radii and strength it understands. The table lists fps, time to the first frame, PSNR of the
luma against the clean clip and GPU memory of the process. The harness is scripts/bench/_bench.py.
Two columns are not denoisers: "source" renders the noisy clip alone (the harness's ceiling),
"write" rewrites the planes a denoiser would write (VapourSynth's own cost of a filter that
allocates and fills a new frame, with no GPU and no Python).
"""

from __future__ import annotations

from pathlib import Path

import _bench

#: name -> (format name, width, height, d, a, s, channels: "Y" or "YUV")
CASES = {
    "Y d1 a2 s4": ("YUV420P8", 1920, 1080, 1, 2, 4, "Y"),
    "YUV444 joint d1 a2 s4": ("YUV444P8", 1920, 1080, 1, 2, 4, "YUV"),
    "Y d2 a4 s4": ("YUV420P8", 1920, 1080, 2, 4, 4, "Y"),
    "Y d0 a2 s4": ("YUV420P8", 1920, 1080, 0, 2, 4, "Y"),
    "Y d1 a2 s4 10-bit": ("YUV420P10", 1920, 1080, 1, 2, 4, "Y"),
    "Y d1 a2 s4 16-bit": ("YUV420P16", 1920, 1080, 1, 2, 4, "Y"),
    "Y d1 a2 s4 4K": ("YUV420P8", 3840, 2160, 1, 2, 4, "Y"),
}
PLUGINS = ("source", "write", "avdenoise", "vszipcu", "knlm", "nlm_cuda", "vsavd")
STRENGTH = 2.4
NOISE = 12.0  # peak-to-peak of the uniform noise, in 8-bit codes
NOISE_MODEL = _bench.Noise("uniform", NOISE)


def make_source(core, fmt_name: str, width: int, height: int):
    """(noisy, clean) clips: 24 crops of an upscaled real picture panning, looped."""
    return _bench.make_source(core, fmt_name, width, height, NOISE_MODEL)


def build_filter(
    core, plugin: str, clip, d: int, a: int, s: int, channels: str, device_id: int | None = None
):
    """`plugin`'s NLM of `clip` with d, a, s, h = STRENGTH and channels "Y" or "YUV".

    `device_id` goes to the GPU rivals that take one (``bench_fleet.py --gpus``); None leaves
    their default device.
    """
    h = STRENGTH
    gpu = {} if device_id is None else {"device_id": device_id}
    if plugin == "source":
        return clip
    if plugin == "write":  # a native filter writing the same planes: what any filter pays
        # The mean of a frame with itself: every written sample is the input's; weight 0
        # passes a plane through unwritten.
        return core.std.Merge(clip, clip, weight=[0.5, 0.0] if channels == "Y" else [0.5])
    if plugin == "avdenoise":
        mode = "luma" if channels == "Y" else "yuv"
        return core.avdenoise.Denoise(
            clip, radius=d, search_radius=a, patch_radius=s, strength=h, channels=mode
        )
    if plugin == "vszipcu":
        return core.vszipcu.NLMeans(
            clip, d=d, a=a, s=s, h=h, channels=channels, num_streams=4, **gpu
        )
    if plugin == "knlm":
        return core.knlm.KNLMeansCL(
            clip, d=d, a=a, s=s, h=h, channels=channels, device_type="gpu", **gpu
        )
    if plugin == "nlm_cuda":
        return core.nlm_cuda.NLMeans(clip, d=d, a=a, s=s, h=h, channels=channels, **gpu)
    if plugin == "vsavd":
        if channels != "Y":
            raise RuntimeError("joint YUV not offered")
        import vsavd  # noqa: F401  (its plugin registers when the package is imported)

        return core.avd.NLMeans(
            clip,
            strength=h,
            search_radius=a,
            patch_radius=s,
            temporal_radius=d,
            channel_mode="luma",
        )
    raise ValueError(plugin)


def _source(core, case: str):
    """The case's (noisy, clean) clips."""
    return make_source(core, *CASES[case][:3])


def _build(core, plugin: str, case: str, noisy):
    """The harness's build hook: :func:`build_filter` with the case's settings, no note."""
    return build_filter(core, plugin, noisy, *CASES[case][3:]), None


SETTINGS_TEXT = f"h={STRENGTH}, {NOISE_MODEL.describe()}"
BENCH = _bench.Bench(
    Path(__file__).resolve(), "NLM speed", SETTINGS_TEXT, CASES, PLUGINS, _source, _build
)

if __name__ == "__main__":
    _bench.main(BENCH, __doc__)
