/*
 * avdenoise VapourSynth bridge: registers the `avdenoise` namespace and forwards every call to
 * Python (`avdenoise_vs._plugin.bridge`). It knows nothing about denoising: it converts arguments,
 * requests the temporal window of frames, allocates the output frame and reports errors.
 *
 * Python side contract (see avdenoise_vs/_plugin/bridge.py):
 *   plugin_functions(gpu) -> [(name, vs_args_signature), ...]   clips declared `vnode:all`
 *                                  where `gpu` (gpu_frames_init) is true, else `vnode`
 *   create(name, args: dict[str, list]) -> plan     (clips arrive as dicts of their video info)
 *   plan.inputs: tuple[str, ...]   argument names of the clips whose windows are requested;
 *                                  the first one is the clip the output copies format from
 *   plan.radius: int               temporal radius of the window
 *   plan.copy_planes: tuple[int]   planes passed through from the centre frame, by reference
 *   plan.props: dict[str, int | float | str]  constant properties set on every output frame,
 *                                  over those copied from the centre frame; read once, after
 *                                  the first frame's plan.process has returned
 *   plan.process(n, frame_numbers, windows, dst) -> None or a host step (host_step.h)
 *       windows[i][t][plane] = (address, stride, memoryview) of input i, window position t,
 *       or windows[i][t] = None where the host step already copied that frame;
 *       dst[plane] likewise, writable, or None for a copied plane.
 *   plan.close() -> None           (optional) called when the filter is freed, before the plan
 *                                  is released: what the plan still runs in the background ends
 *
 * GPU clips (VapourSynth R80+) take gpu_frames.c's frame path, whose contract is in gpu_frames.h;
 * CPU clips never reach it.
 *
 * The GIL is held only around calls into Python. Python symbols come from the host process
 * (vspipe's libpython or the python executable), which is why nothing here links libpython.
 */
#define Py_LIMITED_API 0x030C0000
#include <Python.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame_steps.h"
#include "exit_guard.h"
#include "gpu_frames.h"
#include "values.h"

static unsigned long long last_filter_id; /* assigned under the GIL */

static PyObject *plane_view(const VSFrame *frame, VSFrame *writable, int plane, const VSAPI *vsapi) {
    ptrdiff_t stride = vsapi->getStride(writable ? writable : frame, plane);
    Py_ssize_t size = (Py_ssize_t)stride * vsapi->getFrameHeight(writable ? writable : frame, plane);
    char *data = writable ? (char *)vsapi->getWritePtr(writable, plane)
                          : (char *)vsapi->getReadPtr(frame, plane);
    PyObject *view = PyMemoryView_FromMemory(data, size, writable ? PyBUF_WRITE : PyBUF_READ);
    if (!view) return NULL;
    return Py_BuildValue("(KnN)", (unsigned long long)(size_t)data, (Py_ssize_t)stride, view);
}

static PyObject *frame_planes(const VSFrame *frame, int num_planes, const VSAPI *vsapi) {
    PyObject *planes = PyTuple_New(num_planes);
    for (int p = 0; planes && p < num_planes; p++) {
        PyObject *view = plane_view(frame, NULL, p, vsapi);
        if (!view) Py_CLEAR(planes);
        else PyTuple_SetItem(planes, p, view);
    }
    return planes;
}

static PyObject *destination_planes(VSFrame *dst, const FilterData *d, const VSAPI *vsapi) {
    PyObject *planes = PyTuple_New(d->vi.format.numPlanes);
    for (int p = 0; planes && p < d->vi.format.numPlanes; p++) {
        PyObject *view = d->copy_plane[p] ? Py_BuildValue("") : plane_view(NULL, dst, p, vsapi);
        if (!view) Py_CLEAR(planes);
        else PyTuple_SetItem(planes, p, view);
    }
    return planes;
}

/* Calls plan.process; returns 0 on success (with `step` to run), else fills `error`. */
static int run_process(FilterData *d, int n, const VSFrame *frames[][MAX_WINDOW],
                       const int *staged, VSFrame *dst, HostStep *step, char *error,
                       size_t error_size, const VSAPI *vsapi) {
    int window = 2 * d->radius + 1, status = -1;
    PyGILState_STATE gil = take_gil();
    PyObject *numbers = window_numbers(n, d);
    PyObject *windows = PyTuple_New(d->num_inputs);
    for (int i = 0; windows && i < d->num_inputs; i++) {
        PyObject *frames_i = PyTuple_New(window);
        for (int t = 0; frames_i && t < window; t++) {
            PyObject *planes = staged[i] && t == d->radius
                                   ? Py_BuildValue("")
                                   : frame_planes(frames[i][t], d->vi.format.numPlanes, vsapi);
            if (!planes) Py_CLEAR(frames_i);
            else PyTuple_SetItem(frames_i, t, planes);
        }
        if (!frames_i) Py_CLEAR(windows);
        else PyTuple_SetItem(windows, i, frames_i);
    }
    PyObject *dst_planes = destination_planes(dst, d, vsapi);
    PyObject *result = NULL;
    if (numbers && windows && dst_planes)
        result = PyObject_CallMethod(d->plan, "process", "iOOO", n, numbers, windows, dst_planes);
    if (result)
        status = host_step_read(result, d->id, d->num_inputs, d->vi.format.numPlanes,
                                d->copy_plane, step);
    if (status == 0) status = read_props_once(d, vsapi);
    if (status != 0) format_python_error(error, error_size, "");
    Py_XDECREF(result);
    Py_XDECREF(dst_planes);
    Py_XDECREF(windows);
    Py_XDECREF(numbers);
    PyGILState_Release(gil);
    return status;
}

static const VSFrame *VS_CC filter_get_frame(int n, int reason, void *instance, void **frame_data,
                                            VSFrameContext *ctx, VSCore *core, const VSAPI *vsapi) {
    (void)frame_data;
    FilterData *d = (FilterData *)instance;
    int window = 2 * d->radius + 1;
    if (reason == arInitial) {
        request_window(n, d, ctx, vsapi);
        return NULL;
    }
    if (reason != arAllFramesReady) return NULL;

    const VSFrame *frames[MAX_INPUTS][MAX_WINDOW];
    for (int i = 0; i < d->num_inputs; i++)
        for (int t = 0; t < window; t++)
            frames[i][t] = vsapi->getFrameFilter(clamp_frame(n - d->radius + t, d->vi.numFrames),
                                                 d->nodes[i], ctx);
    const VSFrame *centre = frames[0][d->radius];
    const VSFrame *plane_src[3] = {NULL, NULL, NULL};
    int planes[3] = {0, 1, 2};
    for (int p = 0; p < d->vi.format.numPlanes; p++)
        if (d->copy_plane[p]) plane_src[p] = centre;
    VSFrame *dst = vsapi->newVideoFrame2(&d->vi.format, d->vi.width, d->vi.height, plane_src,
                                         planes, centre, core);

    char error[1024];
    int staged[MAX_INPUTS] = {0};
    const VSFrame *centres[MAX_INPUTS];
    for (int i = 0; i < d->num_inputs; i++) centres[i] = frames[i][d->radius];
    HostStep step;
    int status = -1;
    /* The plan's buffers, which the host step reads and writes, go with the interpreter. */
    if (enter_python()) {
        host_step_stage(d->id, centres, staged, vsapi);
        status = run_process(d, n, frames, staged, dst, &step, error, sizeof error, vsapi);
        if (status == 0) status = host_step_run(&step, dst, error, sizeof error, vsapi);
        leave_python();
    } else {
        snprintf(error, sizeof error, "avdenoise: the Python interpreter is exiting");
    }
    if (status == 0 && d->props) vsapi->copyMap(d->props, vsapi->getFramePropertiesRW(dst));
    for (int i = 0; i < d->num_inputs; i++)
        for (int t = 0; t < window; t++) vsapi->freeFrame(frames[i][t]);
    if (status != 0) {
        vsapi->setFilterError(error, ctx);
        vsapi->freeFrame(dst);
        return NULL;
    }
    return dst;
}

static void VS_CC filter_free(void *instance, VSCore *core, const VSAPI *vsapi) {
    (void)core;
    FilterData *d = (FilterData *)instance;
    for (int i = 0; i < d->num_inputs; i++) vsapi->freeNode(d->nodes[i]);
    if (d->props) vsapi->freeMap(d->props);
    /* A core torn down after the interpreter has finalised must not touch Python. */
    if (d->plan && Py_IsInitialized() && enter_python()) {
        PyGILState_STATE gil = PyGILState_Ensure();
        if (PyObject_HasAttrString(d->plan, "close")) {
            PyObject *closed = PyObject_CallMethod(d->plan, "close", NULL);
            if (!closed) PyErr_Clear(); /* nothing to report it to: the filter is going */
            Py_XDECREF(closed);
        }
        Py_DECREF(d->plan);
        PyGILState_Release(gil);
        leave_python();
    }
    free(d);
}

/* Reads the plan's attributes into `d`; returns 0 on success with a Python error set otherwise. */
static int read_plan(FilterData *d, const VSMap *in, const VSAPI *vsapi) {
    PyObject *inputs = PyObject_GetAttrString(d->plan, "inputs");
    PyObject *radius = PyObject_GetAttrString(d->plan, "radius");
    PyObject *copies = PyObject_GetAttrString(d->plan, "copy_planes");
    int ok = inputs && radius && copies;
    if (ok) {
        d->radius = (int)PyLong_AsLong(radius);
        d->num_inputs = (int)PyObject_Length(inputs);
        ok = !PyErr_Occurred() && d->radius >= 0 && 2 * d->radius + 1 <= MAX_WINDOW &&
             d->num_inputs >= 1 && d->num_inputs <= MAX_INPUTS;
        if (!ok && !PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bridge: bad plan");
    }
    for (int i = 0; ok && i < d->num_inputs; i++) {
        PyObject *name = PySequence_GetItem(inputs, i);
        const char *key = name ? PyUnicode_AsUTF8AndSize(name, NULL) : NULL;
        d->nodes[i] = key ? vsapi->mapGetNode(in, key, 0, NULL) : NULL;
        ok = d->nodes[i] != NULL;
        if (!ok && !PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bridge: missing clip");
        if (!ok) d->num_inputs = i;
        Py_XDECREF(name);
    }
    Py_ssize_t num_copies = ok ? PyObject_Length(copies) : 0;
    for (Py_ssize_t k = 0; ok && k < num_copies; k++) {
        PyObject *item = PySequence_GetItem(copies, k);
        long plane = item ? PyLong_AsLong(item) : -1;
        ok = plane >= 0 && plane < 3;
        if (ok) d->copy_plane[plane] = 1;
        Py_XDECREF(item);
    }
    if (!ok && !PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bridge: bad copy_planes");
    Py_XDECREF(inputs);
    Py_XDECREF(radius);
    Py_XDECREF(copies);
    return ok ? 0 : -1;
}

static void VS_CC filter_create(const VSMap *in, VSMap *out, void *user_data, VSCore *core,
                                const VSAPI *vsapi) {
    const char *name = (const char *)user_data;
    FilterData *d = (FilterData *)calloc(1, sizeof(FilterData));
    char error[1024];
    PyGILState_STATE gil = PyGILState_Ensure();
    d->id = ++last_filter_id; /* under the GIL */
    d->name = name;
    PyObject *args = arguments_dict(in, vsapi);
    if (args && gpu_frames_mark(args, in, name, core, vsapi) != 0) Py_CLEAR(args);
    PyObject *call_args = args ? Py_BuildValue("(sN)", name, args) : NULL;
    d->plan = call_args ? call_bridge("create", call_args) : NULL;
    Py_XDECREF(call_args);
    int failed = !d->plan || read_plan(d, in, vsapi) != 0;
    if (failed) format_python_error(error, sizeof error, "");
    PyGILState_Release(gil);
    if (failed) {
        vsapi->mapSetError(out, error);
        filter_free(d, core, vsapi);
        return;
    }
    d->vi = *vsapi->getVideoInfo(d->nodes[0]);
    VSFilterDependency deps[MAX_INPUTS];
    for (int i = 0; i < d->num_inputs; i++)
        deps[i] = (VSFilterDependency){d->nodes[i], d->radius ? rpGeneral : rpStrictSpatial};
    /* GPU clips (all of them, or none) make a filter of GPU frames: gpu_frames.c. */
    int gpu = gpu_frames_residency(d, vsapi);
    if (gpu < 0) {
        snprintf(error, sizeof error, "avdenoise.%s: the clips must all be GPU or all CPU clips",
                 name);
        vsapi->mapSetError(out, error);
        filter_free(d, core, vsapi);
    } else if (gpu) {
        gpu_frames_create(out, d, filter_free, deps, core, vsapi);
    } else {
        vsapi->createVideoFilter(out, name, &d->vi, filter_get_frame, filter_free, fmParallel,
                                 deps, d->num_inputs, d, core);
    }
}

/* The package version, defined by setup.py from avdenoise_vs/_version.py. */
#if !defined(AVDENOISE_VERSION) || !defined(AVDENOISE_VERSION_MAJOR) || \
    !defined(AVDENOISE_VERSION_MINOR)
#error "build the bridge through setup.py, which defines the AVDENOISE_VERSION macros"
#endif

VS_EXTERNAL_API(void) VapourSynthPluginInit2(VSPlugin *plugin, const VSPLUGINAPI *vspapi) {
    vspapi->configPlugin("com.avdenoise.vs", "avdenoise",
                         "avdenoise_vs " AVDENOISE_VERSION
                         ": GPU video denoisers (NLM, BM3D); docs: help(avdenoise_vs.denoise)",
                         VS_MAKE_VERSION(AVDENOISE_VERSION_MAJOR, AVDENOISE_VERSION_MINOR),
                         VS_MAKE_VERSION(VAPOURSYNTH_API_MAJOR, 0), 0, plugin);
    /* A host without Python (a pure C program) gets an empty namespace rather than a crash. */
    if (!Py_IsInitialized()) return;
    PyGILState_STATE gil = PyGILState_Ensure();
    register_exit_guard();
    /* Clips of either residency where this build's GPU frames match the running library. */
    int gpu = gpu_frames_init(vspapi);
    PyObject *gpu_args = Py_BuildValue("(O)", gpu ? Py_True : Py_False);
    PyObject *functions = gpu_args ? call_bridge("plugin_functions", gpu_args) : NULL;
    Py_XDECREF(gpu_args);
    Py_ssize_t count = functions ? PyObject_Length(functions) : 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        const char *name = NULL, *signature = NULL;
        PyObject *item = PySequence_GetItem(functions, i);
        if (item && PyArg_ParseTuple(item, "ss", &name, &signature))
            vspapi->registerFunction(name, signature, gpu ? "clip:vnode:all;" : "clip:vnode;",
                                     filter_create, strdup(name), plugin);
        Py_XDECREF(item);
    }
    if (PyErr_Occurred()) {
        char error[1024];
        format_python_error(error, sizeof error, "avdenoise: could not load the Python side: ");
        fprintf(stderr, "%s\n", error);
    }
    Py_XDECREF(functions);
    PyGILState_Release(gil);
}
