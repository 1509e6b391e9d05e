/*
 * gpu_frames.c over a fake VapourSynth (tests/native/test_gpu_frames_native.py): the frame path
 * of GPU clips runs without a GPU, against fakes of the VSAPI and VSVULKANAPI calls it makes
 * that keep VapourSynth's rules and count what the bridge takes and gives back:
 *   - getExportableFrameFilter consumes one request of its frame and returns NULL for a frame
 *     with none left; getFrameFilter needs a request and consumes none;
 *   - exportGPUPlane exports only planes of frames taken for export or made by
 *     newGPUVideoFrame, each call a NEW fd (a memory file named "avdenoise-export");
 *   - newVideoFrame2 marks a frame that shares the planes of an exportable one (VapourSynth
 *     fails such a frame when it is returned);
 *   - every frame is fake_counted from its making to its last freeFrame.
 * Failures are injected by call number. The harness calls gpu_get_frame as the core would:
 * arInitial, then arAllFramesReady, on the calling thread, without the GIL. exit_guard.c is
 * part of this file too, so that a test can start the interpreter's exit.
 */
#define _GNU_SOURCE /* memfd_create, and exit_guard.c's dladdr */
#include "exit_guard.c"
#include "gpu_frames.c"

#include <pthread.h>
#include <sys/mman.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_FRAMES 64

struct VSNode {
    int input, residency;
};
struct VSFrame {
    int id, number, input, refs;
    int exportable; /* taken with getExportableFrameFilter */
    int fresh;      /* made by newGPUVideoFrame */
    int shares_exportable;
};
struct VSFrameContext {
    int requests[MAX_INPUTS][MAX_FRAMES];
    char error[1024];
};
struct VSMap {
    int entries;   /* frame properties set */
    int num_clips; /* a call's arguments: "clip" and "ref", nodes[0] and nodes[1] */
};

/* What the fakes do and saw; one activation at a time unless a test says otherwise. */
typedef struct {
    int fail_take_at, fail_wait_at, fail_export_at, fail_new_frame, handle_type, fail_info;
    int takes, waits, exports, residency_calls, frames_alive, frames_made, props_copied;
} Fakes;

static Fakes fakes;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct VSNode nodes[MAX_INPUTS];
static VSVideoFormat format = {cfYUV, stInteger, 8, 1, 1, 1, 3};

static int fake_counted(int *counter) {
    pthread_mutex_lock(&lock);
    int before = (*counter)++;
    pthread_mutex_unlock(&lock);
    return before;
}

static struct VSFrame *fake_new_frame(int number, int input) {
    struct VSFrame *f = calloc(1, sizeof *f);
    f->number = number, f->input = input, f->refs = 1;
    pthread_mutex_lock(&lock);
    f->id = ++fakes.frames_made;
    fakes.frames_alive++;
    pthread_mutex_unlock(&lock);
    return f;
}

static void VS_CC fake_free_frame(const VSFrame *frame) {
    struct VSFrame *f = (struct VSFrame *)frame;
    if (!f) return;
    pthread_mutex_lock(&lock);
    int last = --f->refs == 0;
    if (last) fakes.frames_alive--;
    pthread_mutex_unlock(&lock);
    if (last) free(f);
}

static int fake_take_request(VSFrameContext *ctx, int input, int n, int consume) {
    if (n < 0 || n >= MAX_FRAMES || ctx->requests[input][n] <= 0) return 0;
    if (consume) ctx->requests[input][n]--;
    return 1;
}

static void VS_CC fake_request_frame(int n, VSNode *node, VSFrameContext *ctx) {
    if (n >= 0 && n < MAX_FRAMES) ctx->requests[node->input][n]++;
}

static const VSFrame *VS_CC fake_get_frame(int n, VSNode *node, VSFrameContext *ctx) {
    return fake_take_request(ctx, node->input, n, 0) ? fake_new_frame(n, node->input) : NULL;
}

static const VSFrame *VS_CC fake_get_exportable(int n, VSNode *node, VSFrameContext *ctx,
                                                char *error, int size) {
    if (fake_counted(&fakes.takes) == fakes.fail_take_at) {
        snprintf(error, size, "injected take failure");
        return NULL;
    }
    if (!fake_take_request(ctx, node->input, n, 1)) {
        snprintf(error, size, "frame %d of input %d was not requested", n, node->input);
        return NULL;
    }
    struct VSFrame *f = fake_new_frame(n, node->input);
    f->exportable = 1;
    return f;
}

static int VS_CC fake_wait_frame(const VSFrame *frame, char *error, int size) {
    (void)frame;
    if (fake_counted(&fakes.waits) != fakes.fail_wait_at) return 0;
    snprintf(error, size, "injected wait failure");
    return 1;
}

static ptrdiff_t VS_CC fake_get_stride(const VSFrame *frame, int plane) {
    (void)frame;
    return 128 >> (plane > 0);
}

static int VS_CC fake_export_plane(const VSFrame *frame, int plane,
                                   VSVulkanExportedMemory *out, char *error, int size) {
    const struct VSFrame *f = (const struct VSFrame *)frame;
    if (fake_counted(&fakes.exports) == fakes.fail_export_at) {
        snprintf(error, size, "injected export failure");
        return 1;
    }
    if (!(f->exportable || f->fresh) || plane < 0 || plane >= format.numPlanes) {
        snprintf(error, size, "plane %d of frame %d cannot be exported", plane, f->id);
        return 1;
    }
    out->handle = memfd_create("avdenoise-export", MFD_CLOEXEC);
    out->handleType = fakes.handle_type;
    out->memoryId = (uint64_t)f->id;
    out->memorySize = 1 << 20;
    out->offset = (uint64_t)plane * 4096;
    out->size = (uint64_t)fake_get_stride(frame, plane) * 16;
    return 0;
}

static VSFrame *VS_CC fake_new_gpu_frame(const VSVideoFormat *fmt, int width, int height,
                                         const VSFrame *props, VSCore *core) {
    (void)fmt, (void)width, (void)height, (void)props, (void)core;
    if (fakes.fail_new_frame) return NULL;
    struct VSFrame *f = fake_new_frame(-1, -1);
    f->fresh = 1;
    return f;
}

static VSFrame *VS_CC fake_new_frame2(const VSVideoFormat *fmt, int width, int height,
                                      const VSFrame **sources, const int *planes,
                                      const VSFrame *props, VSCore *core) {
    (void)fmt, (void)width, (void)height, (void)planes, (void)props, (void)core;
    struct VSFrame *f = fake_new_frame(-1, -1);
    for (int p = 0; p < format.numPlanes; p++)
        if (sources[p] && ((const struct VSFrame *)sources[p])->exportable)
            f->shares_exportable = 1;
    return f;
}

static int VS_CC fake_node_residency(VSNode *node) {
    fake_counted(&fakes.residency_calls);
    return node->residency;
}

static void VS_CC fake_set_filter_error(const char *message, VSFrameContext *ctx) {
    snprintf(ctx->error, sizeof ctx->error, "%s", message);
}

static VSMap *VS_CC fake_create_map(void) { return calloc(1, sizeof(VSMap)); }
static void VS_CC fake_free_map(VSMap *map) { free(map); }
static int VS_CC fake_map_set_int(VSMap *map, const char *key, int64_t value, int append) {
    (void)key, (void)value, (void)append;
    map->entries++;
    return 0;
}
static int VS_CC fake_map_set_float(VSMap *map, const char *key, double value, int append) {
    (void)key, (void)value, (void)append;
    map->entries++;
    return 0;
}
static int VS_CC fake_map_set_data(VSMap *map, const char *key, const char *data, int size,
                                   int type, int append) {
    (void)key, (void)data, (void)size, (void)type, (void)append;
    map->entries++;
    return 0;
}
static void VS_CC fake_copy_map(const VSMap *src, VSMap *dst) {
    (void)src, (void)dst;
    fake_counted(&fakes.props_copied);
}
static VSMap *VS_CC fake_frame_props(VSFrame *frame) {
    (void)frame;
    static VSMap props;
    return &props;
}

static const char *const clip_keys[] = {"clip", "ref"};
static int VS_CC fake_map_num_keys(const VSMap *map) { return map->num_clips; }
static const char *VS_CC fake_map_get_key(const VSMap *map, int index) {
    (void)map;
    return clip_keys[index];
}
static int VS_CC fake_map_get_type(const VSMap *map, const char *key) {
    (void)map, (void)key;
    return ptVideoNode;
}
static int VS_CC fake_map_num_elements(const VSMap *map, const char *key) {
    (void)map, (void)key;
    return 1;
}
static VSNode *VS_CC fake_map_get_node(const VSMap *map, const char *key, int index, int *error) {
    (void)map, (void)index, (void)error;
    return &nodes[strcmp(key, "ref") == 0];
}
static void VS_CC fake_free_node(VSNode *node) { (void)node; }

static int VS_CC fake_core_info(VSCore *core, VSVulkanCoreInfo *info, char *error, int size) {
    (void)core;
    if (fakes.fail_info) {
        snprintf(error, size, "injected device failure");
        return 1;
    }
    for (unsigned i = 0; i < VK_UUID_SIZE; i++) info->deviceUUID[i] = (uint8_t)(i * 17);
    info->exportHandleType = fakes.handle_type;
    return 0;
}

static int api_version = VAPOURSYNTH_API_VERSION;
static int VS_CC fake_get_api_version(void) { return api_version; }

static VSVULKANAPI vulkan;
static VSAPI api;
static VSPLUGINAPI plugin_api;

static const VSVULKANAPI *VS_CC fake_get_vulkan_api(void) { return &vulkan; }

static void set_up_api(void) {
    vulkan.getExportableFrameFilter = fake_get_exportable;
    vulkan.waitGPUFrame = fake_wait_frame;
    vulkan.exportGPUPlane = fake_export_plane;
    vulkan.newGPUVideoFrame = fake_new_gpu_frame;
    vulkan.getVulkanCoreInfo = fake_core_info;
    api.mapNumKeys = fake_map_num_keys;
    api.mapGetKey = fake_map_get_key;
    api.mapGetType = fake_map_get_type;
    api.mapNumElements = fake_map_num_elements;
    api.mapGetNode = fake_map_get_node;
    api.freeNode = fake_free_node;
    api.getVulkanAPI = fake_get_vulkan_api;
    api.getNodeResidency = fake_node_residency;
    api.requestFrameFilter = fake_request_frame;
    api.getFrameFilter = fake_get_frame;
    api.freeFrame = fake_free_frame;
    api.newVideoFrame2 = fake_new_frame2;
    api.getStride = fake_get_stride;
    api.setFilterError = fake_set_filter_error;
    api.createMap = fake_create_map;
    api.freeMap = fake_free_map;
    api.mapSetInt = fake_map_set_int;
    api.mapSetFloat = fake_map_set_float;
    api.mapSetData = fake_map_set_data;
    api.copyMap = fake_copy_map;
    api.getFramePropertiesRW = fake_frame_props;
    plugin_api.getAPIVersion = fake_get_api_version;
}

/* ---- what the test calls (through ctypes, without the GIL unless it says so) ---- */

/* gpu_frames_init with the fake library's API version; the GIL is taken here. */
EXPORT int harness_init(int version) {
    set_up_api();
    api_version = version;
    PyGILState_STATE gil = PyGILState_Ensure();
    int usable_now = gpu_frames_init(&plugin_api);
    PyGILState_Release(gil);
    return usable_now;
}

EXPORT void harness_configure(int fail_take_at, int fail_wait_at, int fail_export_at,
                              int fail_new_frame, int handle_type, int fail_info) {
    memset(&fakes, 0, sizeof fakes);
    fakes.fail_take_at = fail_take_at, fakes.fail_wait_at = fail_wait_at;
    fakes.fail_export_at = fail_export_at, fakes.fail_new_frame = fail_new_frame;
    fakes.handle_type = handle_type, fakes.fail_info = fail_info;
}

/* Starts (1) or undoes (0) the interpreter's exit, as the atexit callback would. */
EXPORT void harness_exiting(int exiting) {
    __atomic_store_n(&python_exiting, exiting, __ATOMIC_SEQ_CST);
}

EXPORT const Fakes *harness_fakes(void) { return &fakes; }

/* A filter of `num_inputs` clips (input i a GPU clip where bit i of `gpu_mask` is set), planes
 * in `copy_mask` passed through; `plan` is a new reference the filter keeps. The GIL is taken
 * here. */
EXPORT FilterData *harness_filter(PyObject *plan, int num_inputs, int radius, int num_frames,
                                  int num_planes, int copy_mask, int gpu_mask) {
    FilterData *d = calloc(1, sizeof *d);
    d->name = "Test";
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_INCREF(plan);
    PyGILState_Release(gil);
    d->plan = plan, d->num_inputs = num_inputs, d->radius = radius;
    for (int i = 0; i < num_inputs; i++) {
        nodes[i] = (struct VSNode){i, (gpu_mask >> i) & 1 ? nrGPU : nrCPU};
        d->nodes[i] = &nodes[i];
    }
    for (int p = 0; p < 3; p++) d->copy_plane[p] = (copy_mask >> p) & 1;
    format.numPlanes = num_planes;
    format.colorFamily = num_planes == 1 ? cfGray : cfYUV;
    d->vi = (VSVideoInfo){format, 24, 1, 64, 32, num_frames};
    return d;
}

EXPORT int harness_residency(FilterData *d) { return gpu_frames_residency(d, &api); }

/* gpu_frames_mark over a call of `num_clips` clips ("clip", then "ref": the nodes of the last
 * harness_filter) whose arguments_dict is `args`; 0, or -1 with the Python error's text in
 * `error`. The GIL is taken here. */
EXPORT int harness_mark(PyObject *args, int num_clips, char *error, int size) {
    VSMap in = {0, num_clips};
    PyGILState_STATE gil = PyGILState_Ensure();
    int status = gpu_frames_mark(args, &in, "Test", NULL, &api);
    if (status) format_python_error(error, size, "");
    PyGILState_Release(gil);
    return status;
}

/* One output frame of `d`, as the core asks for it; NULL with `error` set on failure. The
 * requests left over are stored in `left` (the sum over the window). */
EXPORT const VSFrame *harness_frame(FilterData *d, int n, char *error, int size, int *left) {
    VSFrameContext *ctx = calloc(1, sizeof *ctx);
    gpu_get_frame(n, arInitial, d, NULL, ctx, NULL, &api);
    const VSFrame *dst = gpu_get_frame(n, arAllFramesReady, d, NULL, ctx, NULL, &api);
    snprintf(error, size, "%s", ctx->error);
    *left = 0;
    for (int i = 0; i < MAX_INPUTS; i++)
        for (int m = 0; m < MAX_FRAMES; m++) *left += ctx->requests[i][m];
    free(ctx);
    return dst;
}

/* Whether a returned frame is fresh (newGPUVideoFrame's), shares an exportable frame's
 * planes, and its id. */
EXPORT void harness_frame_info(const VSFrame *frame, int *fresh, int *shares, int *id) {
    const struct VSFrame *f = (const struct VSFrame *)frame;
    *fresh = f->fresh, *shares = f->shares_exportable, *id = f->id;
}

EXPORT void harness_free_frame(const VSFrame *frame) { fake_free_frame(frame); }

/* Frees a filter made by harness_filter; the GIL is taken here. */
EXPORT void harness_free_filter(FilterData *d) {
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_DECREF(d->plan);
    PyGILState_Release(gil);
    if (d->props) fake_free_map(d->props);
    free(d);
}
