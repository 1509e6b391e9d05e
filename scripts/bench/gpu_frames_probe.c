/*
 * gpuprobe: the C half of scripts/bench/gpu_frames_probe.py (which builds it; it is no part of
 * the package). One filter, gpuprobe.Export(clip:vnode:gpu, mode), shows what R81's GPU API
 * (VSVulkan4.h, API 4.3) gives a foreign API: per frame it takes the input with
 * getExportableFrameFilter, exports every input plane and every plane of a fresh
 * newGPUVideoFrame output with exportGPUPlane (opaque fds), and hands the lot to a callback that
 * Python set with probe_set_callback. The callback imports the fds into CUDA, reads the input,
 * writes the output and returns; the frame then goes back to the core, still on the GPU.
 *
 *   mode 0: host synchronized: waitGPUFrame(input) before the callback, which finishes its
 *           CUDA work before it returns; no producer pair is published.
 *   mode 1: device synchronized: each input plane's producer semaphore is exported
 *           (exportGPUSemaphore) for the callback to wait in its stream, and the callback
 *           signals this filter's own exported timeline (createGPUTimeline) with call->signal,
 *           which is then published on the output planes with setGPUPlaneProducer.
 *
 * The callback owns every fd it is handed (a successful CUDA import consumes one; it closes
 * the rest). Calls are serialized by a mutex, so timeline values reach the stream in order.
 */
#define VS_USE_API_43
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "VSVulkan4.h"
#include "VapourSynth4.h"

typedef struct {
    int64_t fd; /* the exported allocation, -1 where nothing was exported */
    uint64_t memory_id, memory_size, offset, size;
    int64_t stride, width, height;
    uint64_t semaphore;   /* the plane's producer semaphore (inputs; 0: ready now) */
    int64_t semaphore_fd; /* its export (mode 1), -1 otherwise */
    uint64_t ready_value;
} ProbePlane;

typedef struct {
    int64_t n, mode, num_planes, bytes_per_sample, sample_type, bits;
    int64_t timeline_fd; /* this filter's timeline, exported on its first call only; else -1 */
    uint64_t timeline;   /* its VkSemaphore, a key for the callback's cached import */
    uint64_t signal;     /* mode 1: the value the callback signals on that timeline */
    ProbePlane in[3], out[3];
} ProbeCall;

typedef int (*ProbeCallback)(ProbeCall *call, char *error, int64_t error_size);

static ProbeCallback callback;
static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER;

/* Python checks its ctypes mirror of ProbeCall against this before it sets the callback. */
__attribute__((visibility("default"))) int64_t probe_call_size(void) { return sizeof(ProbeCall); }

__attribute__((visibility("default"))) void probe_set_callback(ProbeCallback function) {
    pthread_mutex_lock(&call_lock);
    callback = function;
    pthread_mutex_unlock(&call_lock);
}

typedef struct {
    VSNode *node;
    VSVideoInfo vi;
    const VSVULKANAPI *vk;
    int mode;
    VSGPUTimeline *timeline; /* mode 1 */
    int timeline_exported;
    uint64_t last_value;
} ProbeData;

static void close_fds(ProbeCall *call) {
    for (int p = 0; p < 3; p++) {
        ProbePlane *planes[2] = {&call->in[p], &call->out[p]};
        for (int k = 0; k < 2; k++) {
            if (planes[k]->fd >= 0) close((int)planes[k]->fd);
            if (planes[k]->semaphore_fd >= 0) close((int)planes[k]->semaphore_fd);
            planes[k]->fd = planes[k]->semaphore_fd = -1;
        }
    }
    if (call->timeline_fd >= 0) close((int)call->timeline_fd);
    call->timeline_fd = -1;
}

/* Exports plane p of `frame` into `out`; 0, or nonzero with `error` set. */
static int export_plane(const ProbeData *d, const VSFrame *frame, int p, const char *what,
                        ProbePlane *out, char *error, int size, const VSAPI *vsapi) {
    VSVulkanExportedMemory exported;
    char reason[512] = "";
    if (d->vk->exportGPUPlane(frame, p, &exported, reason, sizeof reason)) {
        snprintf(error, size, "exportGPUPlane(%s plane %d): %s", what, p, reason);
        return 1;
    }
    out->fd = (int64_t)exported.handle;
    out->memory_id = exported.memoryId;
    out->memory_size = exported.memorySize;
    out->offset = exported.offset;
    out->size = exported.size;
    out->stride = (int64_t)vsapi->getStride(frame, p);
    out->width = vsapi->getFrameWidth(frame, p);
    out->height = vsapi->getFrameHeight(frame, p);
    return 0;
}

/* The input side: planes, their producer pairs, and either their semaphores (mode 1) or a
 * host wait (mode 0). */
static int prepare_input(ProbeData *d, const VSFrame *src, ProbeCall *call, VSCore *core,
                         char *error, int size, const VSAPI *vsapi) {
    for (int p = 0; p < call->num_planes; p++) {
        VSVulkanPlaneInfo info;
        if (d->vk->getGPUPlane(src, p, &info)) {
            snprintf(error, size, "getGPUPlane(input plane %d) failed", p);
            return 1;
        }
        call->in[p].semaphore = (uint64_t)(uintptr_t)info.readySemaphore;
        call->in[p].ready_value = info.readyValue;
        if (export_plane(d, src, p, "input", &call->in[p], error, size, vsapi)) return 1;
        if (d->mode == 1 && info.readySemaphore) {
            VSVulkanExportedSemaphore exported;
            char reason[512] = "";
            if (d->vk->exportGPUSemaphore(core, info.readySemaphore, &exported, reason,
                                          sizeof reason)) {
                snprintf(error, size, "exportGPUSemaphore(input plane %d): %s", p, reason);
                return 1;
            }
            call->in[p].semaphore_fd = (int64_t)exported.handle;
        }
    }
    char reason[512] = "";
    if (d->mode == 0 && d->vk->waitGPUFrame(src, reason, sizeof reason)) {
        snprintf(error, size, "waitGPUFrame(input): %s", reason);
        return 1;
    }
    return 0;
}

/* Runs the callback under the lock (mode 1: with the next timeline value, published on the
 * output planes once the callback has queued its signal). The callback owns the call's fds
 * once called; they are closed here when it is not. */
static int run_callback(ProbeData *d, ProbeCall *call, VSFrame *dst, VSCore *core, char *error,
                        int size) {
    pthread_mutex_lock(&call_lock);
    int status = 0;
    if (!callback) {
        snprintf(error, size, "no callback: call probe_set_callback first");
        status = 1;
    } else if (d->mode == 1 && !d->timeline_exported) {
        /* Exported until a call succeeds: a failed call may not have imported it. */
        VSVulkanExportedSemaphore exported;
        VkSemaphore semaphore = d->vk->getGPUTimelineSemaphore(d->timeline);
        char reason[512] = "";
        status = d->vk->exportGPUSemaphore(core, semaphore, &exported, reason, sizeof reason);
        if (status) snprintf(error, size, "exportGPUSemaphore(own timeline): %s", reason);
        else call->timeline_fd = (int64_t)exported.handle;
    }
    if (status == 0) {
        if (d->timeline)
            call->timeline = (uint64_t)(uintptr_t)d->vk->getGPUTimelineSemaphore(d->timeline);
        call->signal = d->mode == 1 ? d->last_value + 1 : 0;
        status = callback(call, error, size);
        if (status == 0 && d->mode == 1) {
            d->timeline_exported = 1;
            d->last_value = call->signal;
            for (int p = 0; p < call->num_planes; p++)
                d->vk->setGPUPlaneProducer(dst, p, d->timeline, call->signal);
        }
    } else {
        close_fds(call);
    }
    pthread_mutex_unlock(&call_lock);
    return status;
}

static const VSFrame *VS_CC probe_get_frame(int n, int activation, void *instance, void **frame_data,
                                           VSFrameContext *ctx, VSCore *core, const VSAPI *vsapi) {
    (void)frame_data;
    ProbeData *d = (ProbeData *)instance;
    if (activation == arInitial) {
        vsapi->requestFrameFilter(n, d->node, ctx);
        return NULL;
    }
    if (activation != arAllFramesReady) return NULL;
    char error[1024] = "", reason[512] = "", message[1100];
    ProbeCall call;
    memset(&call, 0, sizeof call);
    call.timeline_fd = -1;
    for (int p = 0; p < 3; p++) {
        call.in[p].fd = call.in[p].semaphore_fd = -1;
        call.out[p].fd = call.out[p].semaphore_fd = -1;
    }
    call.n = n;
    call.mode = d->mode;
    call.num_planes = d->vi.format.numPlanes;
    call.bytes_per_sample = d->vi.format.bytesPerSample;
    call.sample_type = d->vi.format.sampleType;
    call.bits = d->vi.format.bitsPerSample;

    VSFrame *dst = NULL;
    const VSFrame *src = d->vk->getExportableFrameFilter(n, d->node, ctx, reason, sizeof reason);
    int status = src ? 0 : 1;
    if (!src) snprintf(error, sizeof error, "getExportableFrameFilter: %s", reason);
    if (status == 0) status = prepare_input(d, src, &call, core, error, sizeof error, vsapi);
    if (status == 0) {
        dst = d->vk->newGPUVideoFrame(&d->vi.format, d->vi.width, d->vi.height, src, core);
        if (!dst) {
            snprintf(error, sizeof error, "newGPUVideoFrame returned NULL");
            status = 1;
        }
    }
    for (int p = 0; status == 0 && p < call.num_planes; p++)
        status = export_plane(d, dst, p, "output", &call.out[p], error, sizeof error, vsapi);
    if (status == 0) status = run_callback(d, &call, dst, core, error, sizeof error);
    else close_fds(&call);
    /* The callback has finished reading the input (mode 0 on the host; mode 1 it synchronized
     * its stream too, which keeps the probe short): nothing else needs it. */
    if (src) vsapi->freeFrame(src);
    if (status != 0) {
        if (dst) vsapi->freeFrame(dst);
        snprintf(message, sizeof message, "gpuprobe.Export: %s", error);
        vsapi->setFilterError(message, ctx);
        return NULL;
    }
    return dst;
}

static void VS_CC probe_free(void *instance, VSCore *core, const VSAPI *vsapi) {
    (void)core;
    ProbeData *d = (ProbeData *)instance;
    vsapi->freeNode(d->node);
    if (d->timeline) d->vk->freeGPUTimeline(d->timeline);
    free(d);
}

static void VS_CC probe_create(const VSMap *in, VSMap *out, void *user_data, VSCore *core,
                               const VSAPI *vsapi) {
    (void)user_data;
    ProbeData *d = (ProbeData *)calloc(1, sizeof(ProbeData));
    char error[512] = "", message[600];
    int err = 0;
    d->mode = (int)vsapi->mapGetInt(in, "mode", 0, &err);
    if (err) d->mode = 0;
    d->node = vsapi->mapGetNode(in, "clip", 0, NULL);
    d->vi = *vsapi->getVideoInfo(d->node);
    d->vk = vsapi->getVulkanAPI();
    VSVulkanCoreInfo info;
    memset(&info, 0, sizeof info);
    const char *failure = NULL;
    if (d->mode != 0 && d->mode != 1) failure = "mode must be 0 or 1";
    else if (d->vi.format.colorFamily == cfUndefined || d->vi.width == 0 || d->vi.height == 0)
        failure = "the clip needs a constant format and size";
    else if (d->vk->getVulkanCoreInfo(core, &info, error, sizeof error)) failure = error;
    else if (!info.exportHandleType) failure = "exportHandleType is 0: this device exports no memory";
    else if (d->mode == 1 && !info.semaphoreExportHandleType)
        failure = "semaphoreExportHandleType is 0: this device exports no semaphores";
    else if (d->mode == 1 && !(d->timeline = d->vk->createGPUTimeline(core, error, sizeof error)))
        failure = error;
    if (failure) {
        snprintf(message, sizeof message, "gpuprobe.Export: %s", failure);
        vsapi->mapSetError(out, message);
        probe_free(d, core, vsapi);
        return;
    }
    VSFilterDependency deps[1] = {{d->node, rpStrictSpatial}};
    vsapi->createVideoFilterEx(out, "Export", &d->vi, probe_get_frame, probe_free, fmParallel,
                               ffGPUOutput, deps, 1, d, core);
}

VS_EXTERNAL_API(void) VapourSynthPluginInit2(VSPlugin *plugin, const VSPLUGINAPI *vspapi) {
    vspapi->configPlugin("com.avdenoise.gpuframesprobe", "gpuprobe",
                         "GPU frame export probe (scripts/bench/gpu_frames_probe.py)",
                         VS_MAKE_VERSION(1, 0), VAPOURSYNTH_API_VERSION, 0, plugin);
    vspapi->registerFunction("Export", "clip:vnode:gpu;mode:int:opt;", "clip:vnode:gpu;",
                             probe_create, NULL, plugin);
}
