"""The CUDA backend's host side, run without a GPU: slots, uploads, launches and downloads.

A fake ``cupy`` keeps "device" memory in host buffers and copies with ``ctypes.memmove``, and
a fake NLM kernel writes, for every pixel of the pass's planes, the largest sample of its
temporal window (``_fake_cuda.py``). The real
:class:`~avdenoise_vs._backends.cuda.backend.CudaBackend`
then runs the bridge's frame protocol, so what CI checks here is the pointer arithmetic (plane
offsets and pitches, chroma planes, staging buffers), the window's slots in time order, that
each source frame crosses the bus once, and every transfer strategy (``_cuda/_transfer/``).
The kernels themselves are the GPU tests' job (``test_nlm_cuda.py`` and the like); the
warm-up and a backend's first use are ``test_backend_warmup_host.py``'s.
"""

from __future__ import annotations

import numpy as np
import pytest

from avdenoise_vs._nlm.cuda import nlm_pass as cuda_nlm

from ._fake_cuda import (
    LAYOUTS,
    LENGTH,
    Bridge,
    expected,
    make_frames,
    nlm_backend,
    process,
    render_in_threads,
)


@pytest.mark.parametrize("transfer", ["direct", "staged"])
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_every_plane_gets_its_window_in_order(fake_cupy, caller, name, transfer):
    runtime, _ = fake_cupy
    backend, layout, written = nlm_backend(name, transfer)
    backend.warm_up()
    frames = make_frames(layout)
    before = dict(runtime.counts)
    for n in range(LENGTH):
        out = process(backend, layout, frames, n, 1, written, caller)
        for p in written:
            np.testing.assert_array_equal(out[p], expected(frames, n, 1, p), err_msg=f"{n}/{p}")
    # Every source frame crossed the bus once, one copy per plane (direct) or per frame.
    copies = runtime.counts.get("copy1", 0) - before.get("copy1", 0)
    per_frame = 1 if transfer == "staged" else len(written)
    assert copies == LENGTH * per_frame


@pytest.mark.parametrize("transfer", ["direct", "staged", "staged-upload", "staged-download"])
@pytest.mark.parametrize("radius", [0, 1])
def test_gated_passes_render_through_every_transfer(
    fake_cupy, caller, monkeypatch, transfer, radius
):
    """Passes with ``frames_in_flight`` (BM3D's) run their GPU part on the gate's output
    buffers, at most that many, and wait for the GPU asleep; each transfer, with Python's or
    the bridge's host copies, still gives every frame its own window."""
    monkeypatch.setattr(cuda_nlm.NlmPass, "frames_in_flight", 2, raising=False)
    backend, layout, written = nlm_backend("YUV420P16", transfer, radius=radius)
    backend.warm_up()
    warmed = backend._local.state  # the warm-up's thread's
    assert warmed.done is not None and warmed.pending is None
    frames = make_frames(layout)
    order = [n % LENGTH for n in range(3 * LENGTH)]
    results = render_in_threads(backend, layout, frames, order, radius, written, caller)
    for n in range(LENGTH):
        np.testing.assert_array_equal(results[n], expected(frames, n, radius, 0))
    assert 1 <= backend._gate.made <= 2


@pytest.mark.parametrize("radius", [0, 1])
def test_auto_stages_gated_frames_and_ungated_ones_by_size_and_window(
    fake_cupy, monkeypatch, radius
):
    """ "auto" stages a gated pass's frames, and an ungated pass's by frame size and window:
    from what the process knows, never from other processes (``_transfer/__init__.py``)."""
    ungated, _, _ = nlm_backend("YUV420P16", "auto", radius=radius)
    monkeypatch.setattr(cuda_nlm.NlmPass, "frames_in_flight", 2, raising=False)
    gated, _, _ = nlm_backend("YUV420P16", "auto", radius=radius)
    assert ungated.transfer == ("staged" if radius == 0 else "direct")
    assert gated.transfer == "staged"


@pytest.mark.parametrize("radius", [0, 1, 2])
def test_gated_frames_take_few_page_locked_buffers(fake_cupy, caller, monkeypatch, radius):
    """Gated frames lend their upload and download buffers back to the backend's pools as
    soon as their copies are done: 8 threads page-lock no more than the pools' limits (a
    window and two for uploads, the frames on the GPU and two for downloads), none of them
    a thread's own, and every buffer is back once the frames are done."""
    monkeypatch.setattr(cuda_nlm.NlmPass, "frames_in_flight", 2, raising=False)
    backend, layout, written = nlm_backend("YUV420P16", "staged", radius=radius)
    backend.warm_up()
    frames = make_frames(layout)
    order = [n % LENGTH for n in range(4 * LENGTH)]
    results = render_in_threads(backend, layout, frames, order, radius, written, caller, 8)
    for n in range(LENGTH):
        np.testing.assert_array_equal(results[n], expected(frames, n, radius, 0))
    up, down = backend.uploader.pool, backend.downloader.pool
    assert 1 <= up.made <= 2 * radius + 1 + 2
    assert 1 <= down.made <= 2 + 2
    assert all(not state.staging for state in backend._states)
    for pool in (up, down):
        assert pool.take() is not None and pool.made <= pool._limit  # a lent one came back


@pytest.mark.parametrize("radius", [0, 1])
def test_gated_frames_under_threads_are_right_and_bounded(fake_cupy, caller, monkeypatch, radius):
    """Gated frames rendered by 8 threads out of order are all right, every gate buffer comes
    back, and the frame cache keeps no more than its soft limit or a window per thread (each
    thread holds its frame's window until the frame is done)."""
    monkeypatch.setattr(cuda_nlm.NlmPass, "frames_in_flight", 1, raising=False)
    backend, layout, written = nlm_backend("GRAY8", "staged", radius=radius)
    backend.warm_up()
    frames = make_frames(layout)
    order = [n % LENGTH for n in range(3 * LENGTH)]
    results = render_in_threads(backend, layout, frames, order, radius, written, caller, 8)
    for n in range(LENGTH):
        np.testing.assert_array_equal(results[n], expected(frames, n, radius, 0))
    window = 2 * radius + 1
    assert len(backend._cache._slots) <= max(backend._cache.soft_limit, window * 8)
    gate = backend._gate
    assert gate.made == 1 and len(gate._buffers) == gate.made  # one place, its buffer back
    assert gate._inside == 0


def test_threads_share_uploads(fake_cupy):
    runtime, _ = fake_cupy
    backend, layout, written = nlm_backend("GRAY8", "direct")
    frames = make_frames(layout)
    results = render_in_threads(backend, layout, frames, range(LENGTH), 1, written)
    for n in range(LENGTH):
        np.testing.assert_array_equal(results[n], expected(frames, n, 1, 0))
    assert runtime.counts["copy1"] == LENGTH


@pytest.mark.parametrize("radius", [1, 2])
def test_wide_windows_share_a_pool_of_upload_buffers(fake_cupy, caller, radius):
    """Staged windows of several frames take page-locked buffers from one pool and give
    them back with the frame: 4 threads page-lock about as many buffers as frames are
    uploaded at once, not a window's worth each, and no thread keeps buffers of its own."""
    backend, layout, written = nlm_backend("YUV420P16", "staged", radius=radius)
    backend.warm_up()
    frames = make_frames(layout)
    order = [n % LENGTH for n in range(3 * LENGTH)]
    results = render_in_threads(backend, layout, frames, order, radius, written, caller)
    for n in range(LENGTH):
        np.testing.assert_array_equal(results[n], expected(frames, n, radius, 0))
    pool = backend.uploader.pool
    window = 2 * radius + 1
    assert 1 <= pool.made < 4 * window  # 4 threads with their own: 4 windows' worth
    assert len(pool._free) + len(pool._lent) == pool.made  # no frame kept a buffer
    assert all(not state.staging for state in backend._states)


def test_failed_upload_fails_the_frame_and_the_next_call_uploads_again(fake_cupy):
    runtime, _ = fake_cupy
    backend, layout, written = nlm_backend("GRAY8", "direct")
    frames = make_frames(layout)
    runtime.fail_uploads = 1
    with pytest.raises(RuntimeError, match="fake upload failure"):
        process(backend, layout, frames, 3, 1, written)
    out = process(backend, layout, frames, 3, 1, written)
    np.testing.assert_array_equal(out[0], expected(frames, 3, 1, 0))


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_bridge_stages_one_frame_windows_and_finishes_them(fake_cupy, name, monkeypatch):
    """Radius 0, staged: after a thread's first frame the bridge copies each frame into the
    staging buffer before the call, Python copies nothing, and the bridge waits and copies out."""
    runtime, calls = fake_cupy
    bridge = Bridge()
    backend, layout, written = nlm_backend(name, "staged", radius=0)
    python_copies = []

    def copy(dst, src):
        python_copies.append(dst.shape)
        np.copyto(dst, src)

    backend.uploader._copy = backend.downloader._copy = copy
    frames = make_frames(layout)
    for n in range(LENGTH):
        out = process(backend, layout, frames, n, 0, written, bridge)
        for p in written:
            np.testing.assert_array_equal(out[p], frames[n][p], err_msg=f"{n}/{p}")
    assert bridge.staged_frames == LENGTH - 1  # all but the thread's first
    assert len(python_copies) == layout.num_planes  # the first frame's upload only
    assert calls.waits == LENGTH
    assert runtime.counts.get("streamSynchronize", 0) == 0


def test_bridge_threads_evict_and_reuse_slots(fake_cupy, monkeypatch):
    """Slots of frames the bridge finishes are released by the thread's next frame: with a
    cache smaller than the frames in flight, every frame still gets its own samples."""
    bridge = Bridge()
    backend, layout, written = nlm_backend("GRAY8", "staged", radius=0, cache_slots=2)
    frames = make_frames(layout)
    order = [n % LENGTH for n in range(4 * LENGTH)]
    results = render_in_threads(backend, layout, frames, order, 0, written, bridge)
    for n in range(LENGTH):
        np.testing.assert_array_equal(results[n], frames[n][0])
    assert bridge.staged_frames > 0


def test_failed_bridge_wait_fails_the_frame_and_the_next_one_synchronizes(fake_cupy, monkeypatch):
    runtime, calls = fake_cupy
    bridge = Bridge()
    backend, layout, written = nlm_backend("GRAY8", "staged", radius=0)
    frames = make_frames(layout)
    calls.wait_status = 7
    with pytest.raises(RuntimeError, match="waiting for the GPU failed"):
        process(backend, layout, frames, 2, 0, written, bridge)
    calls.wait_status = 0
    monkeypatch.setattr(calls, "stream_idle", lambda stream: False)  # still busy, say
    out = process(backend, layout, frames, 3, 0, written, bridge)
    np.testing.assert_array_equal(out[0], frames[3][0])
    assert runtime.counts["streamSynchronize"] == 1  # the failed frame's, before reuse


def test_a_failed_staged_upload_gives_its_pool_buffer_back(fake_cupy):
    """A copy that was never queued leaves its page-locked buffer free for the next frame."""
    runtime, _ = fake_cupy
    backend, layout, written = nlm_backend("YUV420P16", "staged", radius=1)
    frames = make_frames(layout)
    runtime.fail_uploads = 1
    with pytest.raises(RuntimeError, match="fake upload failure"):
        process(backend, layout, frames, 3, 1, written)
    pool = backend.uploader.pool
    assert pool.made == 1 and len(pool._free) == 1
    out = process(backend, layout, frames, 3, 1, written)
    np.testing.assert_array_equal(out[0], expected(frames, 3, 1, 0))
