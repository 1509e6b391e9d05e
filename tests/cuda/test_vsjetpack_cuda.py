"""vsdenoise.nl_means and vsdenoise.bm3d through avdenoise_vs.vsjetpack on a GPU: the frames
of the drop-ins called directly on the same device (needs vsjetpack, CuPy and a CUDA GPU)."""

from __future__ import annotations

import pytest
import vapoursynth as vs

from avdenoise_vs.vsjetpack import Backend, backend

from ..test_vsjetpack import make_clip, nlm
from ..test_vsjetpack_bm3d import direct
from ..vsclips import assert_same_frames
from ._gpu import require_cuda

require_cuda()
vsdenoise = pytest.importorskip("vsdenoise", reason="vsjetpack is not installed")

pytestmark = pytest.mark.gpu

CUDA = Backend(device="cuda")


@pytest.mark.parametrize(
    "format_id, planes, channels",
    [(vs.YUV420P8, [0], "Y"), (vs.YUV420P16, [1, 2], "UV"), (vs.YUV444PS, None, "YUV")],
)
def test_nl_means(core, format_id, planes, channels):
    clip = make_clip(core, format_id, width=320, height=240)
    got = vsdenoise.nl_means(clip, 0.8, planes=planes, backend=CUDA)
    assert_same_frames(got, nlm(core, clip, h=0.8, channels=channels, device="cuda"))


@pytest.mark.parametrize(
    "format_id, profile, tr",
    [(vs.YUV444PS, "fast", None), (vs.YUV420PS, "np", 2), (vs.GRAYS, "lc", 0)],
)
def test_bm3d(core, format_id, profile, tr):
    clip = make_clip(core, format_id, length=5, width=320, height=240)
    got = vsdenoise.bm3d(clip, 1.5, tr, profile=vsdenoise.bm3d.Profile(profile), backend=CUDA)
    assert_same_frames(
        got, direct(core, clip, [1.5] * clip.format.num_planes, profile, tr, device="cuda")
    )


def test_auto_runs_on_the_gpu(core):
    clip = make_clip(core, vs.YUV444PS, length=2, width=320, height=240)
    out = vsdenoise.bm3d(clip, sigma=1.0, tr=1, backend=backend).get_frame(0)
    assert out.props["AvdenoiseBackend"] == "cuda"
