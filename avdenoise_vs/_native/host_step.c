/* The host step's three parts (the contract is in host_step.h). */
#include "host_step.h"

#include <stdio.h>
#include <string.h>

#define MAX_STAGING (MAX_INPUTS * 3)

/* Where this thread copies its next frame of one filter before taking the GIL. */
typedef struct {
    unsigned long long filter_id;
    int count;
    PlaneCopy copies[MAX_STAGING];
} Staging;

#define STAGING_RECORDS 4 /* per thread; a collision only costs a frame its early copy */
static _Thread_local Staging thread_staging[STAGING_RECORDS];

static void copy_rows(char *dst, ptrdiff_t dst_stride, const char *src, ptrdiff_t src_stride,
                      size_t row_bytes, int rows) {
    if (dst_stride == src_stride && (size_t)dst_stride == row_bytes) {
        memcpy(dst, src, row_bytes * (size_t)rows);
        return;
    }
    for (int y = 0; y < rows; y++) memcpy(dst + y * dst_stride, src + y * src_stride, row_bytes);
}

static size_t row_bytes(const VSFrame *frame, int plane, const VSAPI *vsapi) {
    const VSVideoFormat *format = vsapi->getVideoFrameFormat(frame);
    return (size_t)vsapi->getFrameWidth(frame, plane) * (size_t)format->bytesPerSample;
}

void host_step_stage(unsigned long long filter_id, const VSFrame *const centres[MAX_INPUTS],
                     int staged[MAX_INPUTS], const VSAPI *vsapi) {
    Staging *staging = &thread_staging[filter_id % STAGING_RECORDS];
    if (staging->filter_id != filter_id) return;
    for (int k = 0; k < staging->count; k++) {
        const PlaneCopy *c = &staging->copies[k];
        const VSFrame *frame = centres[c->input];
        copy_rows(c->address, c->stride, (const char *)vsapi->getReadPtr(frame, c->plane),
                  vsapi->getStride(frame, c->plane), row_bytes(frame, c->plane, vsapi),
                  vsapi->getFrameHeight(frame, c->plane));
        staged[c->input] = 1;
    }
    staging->count = 0; /* each request covers one frame */
}

/* One copy description from Python: ([input,] plane, address, stride). */
static int read_copy(PyObject *item, PlaneCopy *copy, int with_input) {
    unsigned long long address = 0;
    Py_ssize_t stride = 0;
    int ok = with_input ? PyArg_ParseTuple(item, "iiKn", &copy->input, &copy->plane, &address,
                                           &stride)
                        : PyArg_ParseTuple(item, "iKn", &copy->plane, &address, &stride);
    copy->address = (char *)(size_t)address;
    copy->stride = stride;
    return ok && address ? 0 : -1;
}

int host_step_read(PyObject *result, unsigned long long filter_id, int num_inputs,
                   int num_planes, const int copy_plane[3], HostStep *step) {
    memset(step, 0, sizeof *step);
    if (result == Py_None) return 0;
    unsigned long long wait = 0, argument = 0, done = 0;
    PyObject *outs = NULL, *stagings = NULL;
    if (!PyArg_ParseTuple(result, "KKOO|K", &wait, &argument, &outs, &stagings, &done)) return -1;
    Py_ssize_t num_out = PyObject_Length(outs), num_staging = PyObject_Length(stagings);
    int ok = num_out >= 0 && num_out <= 3 && num_staging >= 0 && num_staging <= MAX_STAGING;
    for (Py_ssize_t k = 0; ok && k < num_out; k++) {
        PyObject *item = PySequence_GetItem(outs, k);
        PlaneCopy *c = &step->out[k];
        ok = item && read_copy(item, c, 0) == 0 && c->plane >= 0 && c->plane < num_planes &&
             !copy_plane[c->plane];
        Py_XDECREF(item);
    }
    Staging next = {filter_id, (int)num_staging, {{0}}};
    for (Py_ssize_t k = 0; ok && k < num_staging; k++) {
        PyObject *item = PySequence_GetItem(stagings, k);
        PlaneCopy *c = &next.copies[k];
        ok = item && read_copy(item, c, 1) == 0 && c->input >= 0 && c->input < num_inputs &&
             c->plane >= 0 && c->plane < num_planes;
        Py_XDECREF(item);
    }
    if (!ok) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bridge: bad host step");
        return -1;
    }
    step->wait = (int (*)(void *))(size_t)wait;
    step->wait_argument = (void *)(size_t)argument;
    step->num_out = (int)num_out;
    step->done = (int *)(size_t)done;
    thread_staging[filter_id % STAGING_RECORDS] = next;
    return 0;
}

int host_step_run(const HostStep *step, VSFrame *dst, char *error, size_t error_size,
                  const VSAPI *vsapi) {
    if (step->wait) {
        int status = step->wait(step->wait_argument);
        if (status) {
            snprintf(error, error_size, "avdenoise: waiting for the GPU failed (CUDA error %d)",
                     status);
            return -1;
        }
    }
    for (int k = 0; k < step->num_out; k++) {
        const PlaneCopy *c = &step->out[k];
        copy_rows((char *)vsapi->getWritePtr(dst, c->plane), vsapi->getStride(dst, c->plane),
                  c->address, c->stride, row_bytes(dst, c->plane, vsapi),
                  vsapi->getFrameHeight(dst, c->plane));
    }
    if (step->done) __atomic_store_n(step->done, 1, __ATOMIC_RELEASE);
    return 0;
}
