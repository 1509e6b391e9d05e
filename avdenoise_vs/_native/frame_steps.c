/* The steps of a frame that do not depend on where its planes live (the contract is in
 * frame_steps.h): bridge.c's host frames and gpu_frames.c's GPU frames both take them. */
#define Py_LIMITED_API 0x030C0000
#include <Python.h>
#include <stdio.h>

#include "frame_steps.h"
#include "values.h"

#define BRIDGE_MODULE "avdenoise_vs._plugin.bridge"

void format_python_error(char *buffer, size_t size, const char *prefix) {
    PyObject *type = NULL, *value = NULL, *trace = NULL;
    PyErr_Fetch(&type, &value, &trace);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    const char *message = text ? PyUnicode_AsUTF8AndSize(text, NULL) : NULL;
    snprintf(buffer, size, "%s%s", prefix, message ? message : "unknown Python error");
    if (!message) PyErr_Clear();
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(trace);
}

PyObject *call_bridge(const char *function, PyObject *args) {
    PyObject *module = PyImport_ImportModule(BRIDGE_MODULE);
    if (!module) return NULL;
    PyObject *callable = PyObject_GetAttrString(module, function);
    Py_DECREF(module);
    if (!callable) return NULL;
    PyObject *result = PyObject_CallObject(callable, args);
    Py_DECREF(callable);
    return result;
}

int clamp_frame(int n, int num_frames) {
    return n < 0 ? 0 : (n >= num_frames ? num_frames - 1 : n);
}

/* Takes the GIL for a frame. On a VapourSynth worker thread's first frame it also pins a
 * Python thread state to the thread (one PyGILState_Ensure that is never released): without
 * it, every frame would create and destroy the thread's state, and with it everything
 * thread-local in Python (the CUDA backend's per-thread stream and buffers, CuPy's current
 * device), rebuilding them each frame. A thread that already has a Python state (a Python
 * thread, which may hold the GIL now) is left alone. */
static _Thread_local int python_state_pinned;

PyGILState_STATE take_gil(void) {
    if (!python_state_pinned) {
        python_state_pinned = 1;
        if (PyGILState_GetThisThreadState() == NULL) {
            PyGILState_Ensure();
            PyEval_SaveThread();
        }
    }
    return PyGILState_Ensure();
}

/* After a frame's plan.process succeeded. The release store publishes `props` to frames that
 * check `props_read` without the GIL (props_have_been_read); `props` never changes after. */
int read_props_once(FilterData *d, const VSAPI *vsapi) {
    if (d->props_read) return 0;
    PyObject *props = PyObject_GetAttrString(d->plan, "props");
    int status = props ? props_to_map(props, &d->props, vsapi) : -1;
    Py_XDECREF(props);
    if (status == 0) __atomic_store_n(&d->props_read, 1, __ATOMIC_RELEASE);
    return status;
}

int props_have_been_read(const FilterData *d) {
    return __atomic_load_n(&d->props_read, __ATOMIC_ACQUIRE);
}

PyObject *window_numbers(int n, const FilterData *d) {
    int window = 2 * d->radius + 1;
    PyObject *numbers = PyTuple_New(window);
    for (int t = 0; numbers && t < window; t++)
        PyTuple_SetItem(numbers, t, PyLong_FromLong(clamp_frame(n - d->radius + t, d->vi.numFrames)));
    return numbers;
}

void request_window(int n, const FilterData *d, VSFrameContext *ctx, const VSAPI *vsapi) {
    for (int i = 0; i < d->num_inputs; i++)
        for (int t = 0; t < 2 * d->radius + 1; t++) {
            int m = clamp_frame(n - d->radius + t, d->vi.numFrames);
            /* The clamped window repeats frames at the clip ends: request each once. */
            if (t == 0 || m != clamp_frame(n - d->radius + t - 1, d->vi.numFrames))
                vsapi->requestFrameFilter(m, d->nodes[i], ctx);
        }
}
