/*
 * GPU frames for the bridge (the contract is in gpu_frames.h; docs/GPU_FRAMES.md has the API):
 * a filter of GPU clips takes its inputs for export, waits for them on the host, exports their
 * planes and those of a fresh GPU frame, and hands the lot to plan.process as plain numbers.
 * Compiled with VS_USE_API_43 where setup.py found VSVulkan4.h.
 */
#define VS_USE_API_43
#include "gpu_frames.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "VSVulkan4.h"
#include "exit_guard.h"

#if !defined(AVDENOISE_VS_RELEASE)
#error "setup.py defines AVDENOISE_VS_RELEASE, the VapourSynth release of VSVulkan4.h"
#endif

#define OPAQUE_FD 1 /* VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT, what CUDA imports here */
#define MAX_TAKEN (MAX_INPUTS * MAX_WINDOW)

/* Set at each core's registration (always to the same value: one library per process) and read
 * by the frames of every core, hence the atomics. */
static int usable_library;

/* Whether the running library is the one built against. */
static int usable(void) { return __atomic_load_n(&usable_library, __ATOMIC_RELAXED); }

/* One exported plane: what Python gets of it. */
typedef struct {
    int fd; /* -1 until exported */
    uint64_t memory_id, memory_size, offset;
    ptrdiff_t stride;
} Exported;

/* One output frame of a filter of GPU clips, from its inputs to its return. */
typedef struct {
    const VSFrame *taken[MAX_TAKEN]; /* the window's distinct frames, held until the end */
    int number[MAX_TAKEN], input[MAX_TAKEN]; /* each one's frame number and input, for messages */
    int num_taken;
    int index[MAX_INPUTS][MAX_WINDOW]; /* window position -> taken[] */
    Exported in[MAX_TAKEN][3];
    Exported out[3];
    VSFrame *dst;
} GpuFrame;

int gpu_frames_init(const VSPLUGINAPI *vspapi) {
    PyObject *release = call_bridge("vapoursynth_release", NULL);
    long running = release ? PyLong_AsLong(release) : -1;
    Py_XDECREF(release);
    PyErr_Clear(); /* no release to compare: the plain path */
    int same = vspapi->getAPIVersion() == VAPOURSYNTH_API_VERSION &&
               running == AVDENOISE_VS_RELEASE;
    __atomic_store_n(&usable_library, same, __ATOMIC_RELAXED);
    return same;
}

static PyObject *uuid_hex(const uint8_t *uuid) {
    char text[2 * VK_UUID_SIZE + 1];
    for (unsigned i = 0; i < VK_UUID_SIZE; i++) snprintf(text + 2 * i, 3, "%02x", uuid[i]);
    return PyUnicode_FromString(text);
}

/* Sets the residency keys of one clip's dict; 0, or -1 with a Python error. */
static int mark_clip(PyObject *info, VSNode *node, const char *name, VSCore *core,
                     const VSAPI *vsapi) {
    int gpu = vsapi->getNodeResidency(node) == nrGPU;
    if (PyDict_SetItemString(info, "gpu", gpu ? Py_True : Py_False) < 0) return -1;
    if (!gpu) return 0;
    VSVulkanCoreInfo device;
    char reason[512] = "";
    memset(&device, 0, sizeof device);
    if (vsapi->getVulkanAPI()->getVulkanCoreInfo(core, &device, reason, sizeof reason)) {
        PyErr_Format(PyExc_RuntimeError, "avdenoise.%s: the Vulkan device cannot be read: %s",
                     name, reason);
        return -1;
    }
    PyObject *uuid = uuid_hex(device.deviceUUID);
    PyObject *export = PyLong_FromLong(device.exportHandleType);
    int status = uuid && export && PyDict_SetItemString(info, "vulkan_uuid", uuid) == 0 &&
                         PyDict_SetItemString(info, "vulkan_export", export) == 0
                     ? 0
                     : -1;
    Py_XDECREF(uuid);
    Py_XDECREF(export);
    return status;
}

int gpu_frames_mark(PyObject *args, const VSMap *in, const char *name, VSCore *core,
                    const VSAPI *vsapi) {
    if (!usable()) return 0;
    int keys = vsapi->mapNumKeys(in);
    for (int k = 0; k < keys; k++) {
        const char *key = vsapi->mapGetKey(in, k);
        if (vsapi->mapGetType(in, key) != ptVideoNode) continue;
        PyObject *clips = PyDict_GetItemString(args, key); /* borrowed */
        int count = vsapi->mapNumElements(in, key);
        for (int i = 0; clips && i < count; i++) {
            PyObject *info = PyList_GetItem(clips, i); /* borrowed */
            VSNode *node = vsapi->mapGetNode(in, key, i, NULL);
            int status = info && PyDict_Check(info) ? mark_clip(info, node, name, core, vsapi) : 0;
            vsapi->freeNode(node);
            if (status) return -1;
        }
    }
    return 0;
}

int gpu_frames_residency(const FilterData *d, const VSAPI *vsapi) {
    if (!usable()) return 0;
    int gpu = 0;
    for (int i = 0; i < d->num_inputs; i++) {
        int here = vsapi->getNodeResidency(d->nodes[i]) == nrGPU;
        if (i > 0 && here != gpu) return -1;
        gpu = here;
    }
    return gpu;
}

static int all_passed_through(const FilterData *d) {
    for (int p = 0; p < d->vi.format.numPlanes; p++)
        if (!d->copy_plane[p]) return 0;
    return 1;
}

/* Reads plan.props (once) outside plan.process, for frames that make no call; 0 or -1. */
static int props_without_process(FilterData *d, char *error, size_t size, const VSAPI *vsapi) {
    if (props_have_been_read(d)) return 0;
    if (!enter_python()) {
        snprintf(error, size, "avdenoise: the Python interpreter is exiting");
        return -1;
    }
    PyGILState_STATE gil = take_gil();
    int status = read_props_once(d, vsapi);
    if (status != 0) format_python_error(error, size, "");
    PyGILState_Release(gil);
    leave_python();
    return status;
}

/* Every plane passed through: the centre frame's planes, shared, as on the CPU (frames taken
 * with getFrameFilter may share their planes; exportable ones may not). The window's other
 * frames, requested as for any filter, are left to the core. */
static VSFrame *pass_through(int n, FilterData *d, VSFrameContext *ctx, VSCore *core,
                             char *error, size_t size, const VSAPI *vsapi) {
    int m = clamp_frame(n, d->vi.numFrames);
    const VSFrame *centre = vsapi->getFrameFilter(m, d->nodes[0], ctx);
    if (!centre) { /* a CPU frame made without sources would be a blank one */
        snprintf(error, size, "avdenoise.%s: frame %d of input 0 is missing", d->name, m);
        return NULL;
    }
    const VSFrame *sources[3] = {centre, centre, centre};
    int planes[3] = {0, 1, 2};
    VSFrame *dst = vsapi->newVideoFrame2(&d->vi.format, d->vi.width, d->vi.height, sources, planes,
                                         centre, core);
    vsapi->freeFrame(centre);
    if (!dst) {
        snprintf(error, size, "avdenoise.%s: no frame could be made for the output", d->name);
        return NULL;
    }
    if (props_without_process(d, error, size, vsapi) != 0) {
        vsapi->freeFrame(dst);
        return NULL;
    }
    return dst;
}

/* Takes every distinct frame of the window for export and waits for it on the host. */
static int take_inputs(int n, const FilterData *d, GpuFrame *f, VSFrameContext *ctx,
                       const VSVULKANAPI *vk, char *error, size_t size) {
    char reason[512];
    for (int i = 0; i < d->num_inputs; i++)
        for (int t = 0; t < 2 * d->radius + 1; t++) {
            int m = clamp_frame(n - d->radius + t, d->vi.numFrames);
            if (t > 0 && m == clamp_frame(n - d->radius + t - 1, d->vi.numFrames)) {
                f->index[i][t] = f->index[i][t - 1]; /* requested once: taken once */
                continue;
            }
            reason[0] = '\0';
            const VSFrame *frame = vk->getExportableFrameFilter(m, d->nodes[i], ctx, reason,
                                                                sizeof reason);
            if (!frame) {
                snprintf(error, size, "avdenoise.%s: frame %d of input %d cannot be taken for "
                         "export: %s", d->name, m, i, reason);
                return -1;
            }
            int k = f->num_taken++;
            f->taken[k] = frame, f->number[k] = m, f->input[k] = i, f->index[i][t] = k;
            reason[0] = '\0';
            if (vk->waitGPUFrame(frame, reason, sizeof reason)) {
                snprintf(error, size, "avdenoise.%s: waiting for frame %d of input %d failed: %s",
                         d->name, m, i, reason);
                return -1;
            }
        }
    return 0;
}

/* Exports `plane` of `frame` into `out` (its fd then closed by close_fds); 0, or -1. */
static int export_plane(const FilterData *d, const VSFrame *frame, int plane, Exported *out,
                        const char *what, const VSVULKANAPI *vk, char *error, size_t size,
                        const VSAPI *vsapi) {
    VSVulkanExportedMemory exported;
    char reason[512] = "";
    memset(&exported, 0, sizeof exported);
    if (vk->exportGPUPlane(frame, plane, &exported, reason, sizeof reason)) {
        snprintf(error, size, "avdenoise.%s: plane %d of %s cannot be exported: %s", d->name,
                 plane, what, reason);
        return -1;
    }
    out->fd = (int)exported.handle;
    if (exported.handleType != OPAQUE_FD) {
        snprintf(error, size, "avdenoise.%s: plane %d of %s exports as handle type %d, and only "
                 "opaque file descriptors (1) import into CUDA here", d->name, plane, what,
                 exported.handleType);
        return -1;
    }
    out->memory_id = exported.memoryId;
    out->memory_size = exported.memorySize;
    out->offset = exported.offset;
    out->stride = vsapi->getStride(frame, plane);
    return 0;
}

static int export_inputs(const FilterData *d, GpuFrame *f, const VSVULKANAPI *vk, char *error,
                         size_t size, const VSAPI *vsapi) {
    char what[64];
    for (int k = 0; k < f->num_taken; k++)
        for (int p = 0; p < d->vi.format.numPlanes; p++) {
            snprintf(what, sizeof what, "frame %d of input %d", f->number[k], f->input[k]);
            if (export_plane(d, f->taken[k], p, &f->in[k][p], what, vk, error, size, vsapi))
                return -1;
        }
    return 0;
}

/* A fresh GPU frame with the centre frame's properties, every plane exported for writing. */
static int make_output(const FilterData *d, GpuFrame *f, VSCore *core, const VSVULKANAPI *vk,
                       char *error, size_t size, const VSAPI *vsapi) {
    const VSFrame *centre = f->taken[f->index[0][d->radius]];
    f->dst = vk->newGPUVideoFrame(&d->vi.format, d->vi.width, d->vi.height, centre, core);
    if (!f->dst) {
        snprintf(error, size, "avdenoise.%s: no GPU frame could be made for the output", d->name);
        return -1;
    }
    for (int p = 0; p < d->vi.format.numPlanes; p++)
        if (export_plane(d, f->dst, p, &f->out[p], "the output frame", vk, error, size, vsapi))
            return -1;
    return 0;
}

static PyObject *planes_tuple(const Exported *planes, int count) {
    PyObject *tuple = PyTuple_New(count);
    for (int p = 0; tuple && p < count; p++) {
        const Exported *e = &planes[p];
        PyObject *item = Py_BuildValue("(iKKKn)", e->fd, (unsigned long long)e->memory_id,
                                       (unsigned long long)e->memory_size,
                                       (unsigned long long)e->offset, (Py_ssize_t)e->stride);
        if (!item) Py_CLEAR(tuple);
        else PyTuple_SetItem(tuple, p, item);
    }
    return tuple;
}

/* windows[i][t] from the distinct frames' plane tuples (repeated positions share one). */
static PyObject *windows_tuple(const FilterData *d, const GpuFrame *f) {
    int planes = d->vi.format.numPlanes, window = 2 * d->radius + 1;
    PyObject *taken = PyTuple_New(f->num_taken);
    for (int k = 0; taken && k < f->num_taken; k++) {
        PyObject *item = planes_tuple(f->in[k], planes);
        if (!item) Py_CLEAR(taken);
        else PyTuple_SetItem(taken, k, item);
    }
    PyObject *windows = taken ? PyTuple_New(d->num_inputs) : NULL;
    for (int i = 0; windows && i < d->num_inputs; i++) {
        PyObject *frames = PyTuple_New(window);
        for (int t = 0; frames && t < window; t++) {
            PyObject *item = PyTuple_GetItem(taken, f->index[i][t]);
            Py_INCREF(item);
            PyTuple_SetItem(frames, t, item);
        }
        if (!frames) Py_CLEAR(windows);
        else PyTuple_SetItem(windows, i, frames);
    }
    Py_XDECREF(taken);
    return windows;
}

/* Calls plan.process with the exported planes; 0, or -1 with `error` set. */
static int call_plan(int n, FilterData *d, const GpuFrame *f, char *error, size_t size,
                     const VSAPI *vsapi) {
    if (!enter_python()) {
        snprintf(error, size, "avdenoise: the Python interpreter is exiting");
        return -1;
    }
    PyGILState_STATE gil = take_gil();
    int status = -1;
    PyObject *numbers = window_numbers(n, d);
    PyObject *windows = windows_tuple(d, f);
    PyObject *dst = planes_tuple(f->out, d->vi.format.numPlanes);
    PyObject *result = NULL;
    if (numbers && windows && dst)
        result = PyObject_CallMethod(d->plan, "process", "iOOO", n, numbers, windows, dst);
    if (result == Py_None) status = 0;
    else if (result) /* a host step would copy through host pointers, which GPU frames lack */
        PyErr_Format(PyExc_TypeError, "avdenoise.%s: plan.process must return None for GPU "
                     "frames, got %.80R", d->name, result);
    if (status == 0) status = read_props_once(d, vsapi);
    if (status != 0) format_python_error(error, size, "");
    Py_XDECREF(result);
    Py_XDECREF(dst);
    Py_XDECREF(windows);
    Py_XDECREF(numbers);
    PyGILState_Release(gil);
    leave_python();
    return status;
}

static void close_fds(GpuFrame *f) {
    for (int k = 0; k < f->num_taken; k++)
        for (int p = 0; p < 3; p++)
            if (f->in[k][p].fd >= 0) close(f->in[k][p].fd);
    for (int p = 0; p < 3; p++)
        if (f->out[p].fd >= 0) close(f->out[p].fd);
}

static GpuFrame *new_gpu_frame(void) {
    GpuFrame *f = (GpuFrame *)calloc(1, sizeof(GpuFrame));
    for (int k = 0; f && k < MAX_TAKEN; k++)
        for (int p = 0; p < 3; p++) f->in[k][p].fd = -1;
    for (int p = 0; f && p < 3; p++) f->out[p].fd = -1;
    return f;
}

/* A frame computed on the device: inputs taken and waited for, output made, plan called. */
static VSFrame *device_frame(int n, FilterData *d, VSFrameContext *ctx, VSCore *core,
                             char *error, size_t size, const VSAPI *vsapi) {
    const VSVULKANAPI *vk = vsapi->getVulkanAPI();
    GpuFrame *f = new_gpu_frame();
    if (!f) {
        snprintf(error, size, "avdenoise.%s: out of memory", d->name);
        return NULL;
    }
    int status = take_inputs(n, d, f, ctx, vk, error, size);
    if (status == 0) status = make_output(d, f, core, vk, error, size, vsapi);
    if (status == 0) status = export_inputs(d, f, vk, error, size, vsapi);
    if (status == 0) status = call_plan(n, d, f, error, size, vsapi);
    VSFrame *dst = f->dst;
    close_fds(f);
    for (int k = 0; k < f->num_taken; k++) vsapi->freeFrame(f->taken[k]);
    free(f);
    if (status != 0) {
        if (dst) vsapi->freeFrame(dst);
        return NULL;
    }
    return dst;
}

static const VSFrame *VS_CC gpu_get_frame(int n, int reason, void *instance, void **frame_data,
                                         VSFrameContext *ctx, VSCore *core, const VSAPI *vsapi) {
    (void)frame_data;
    FilterData *d = (FilterData *)instance;
    if (reason == arInitial) {
        request_window(n, d, ctx, vsapi);
        return NULL;
    }
    if (reason != arAllFramesReady) return NULL;
    char error[1024] = "";
    VSFrame *dst = all_passed_through(d) ? pass_through(n, d, ctx, core, error, sizeof error, vsapi)
                                         : device_frame(n, d, ctx, core, error, sizeof error, vsapi);
    if (!dst) {
        vsapi->setFilterError(error, ctx);
        return NULL;
    }
    if (d->props) vsapi->copyMap(d->props, vsapi->getFramePropertiesRW(dst));
    return dst;
}

void gpu_frames_create(VSMap *out, FilterData *d, VSFilterFree free_filter,
                       const VSFilterDependency *deps, VSCore *core, const VSAPI *vsapi) {
    vsapi->createVideoFilterEx(out, d->name, &d->vi, gpu_get_frame, free_filter, fmParallel,
                               ffGPUOutput, deps, d->num_inputs, d, core);
}
