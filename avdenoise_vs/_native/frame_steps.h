/*
 * A filter's data, and the steps of a frame that do not depend on where its planes live
 * (frame_steps.c), which bridge.c and gpu_frames.c share. The GIL is held only where a function says so.
 */
#ifndef AVDENOISE_FRAME_STEPS_H
#define AVDENOISE_FRAME_STEPS_H

#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030C0000
#endif
#include <Python.h>

#include "VapourSynth4.h"
#include "host_step.h" /* MAX_INPUTS */

#define MAX_WINDOW 65

typedef struct {
    unsigned long long id; /* keys the host step's staging: never reused, unlike addresses */
    const char *name;      /* the registered function's, for messages */
    PyObject *plan;
    VSNode *nodes[MAX_INPUTS];
    int num_inputs;
    int radius;
    int copy_plane[3];
    VSMap *props;   /* plan.props, or NULL when it is empty */
    int props_read; /* plan.props has been read into `props`: set once, under the GIL */
    VSVideoInfo vi;
} FilterData;

/* Calls `function` of avdenoise_vs._plugin.bridge with `args` (a tuple, or NULL); GIL held. */
PyObject *call_bridge(const char *function, PyObject *args);

/* Sets `buffer` to "prefix: <Python exception text>" and clears the exception; GIL held. */
void format_python_error(char *buffer, size_t size, const char *prefix);

/* Takes the GIL for a frame, pinning a Python thread state to a VapourSynth worker thread. */
PyGILState_STATE take_gil(void);

int clamp_frame(int n, int num_frames);

/* Requests the window of frame `n` of every input, each distinct frame once. */
void request_window(int n, const FilterData *d, VSFrameContext *ctx, const VSAPI *vsapi);

/* The frame numbers of `n`'s window, clamped to the clip, as a tuple; GIL held. */
PyObject *window_numbers(int n, const FilterData *d);

/* Reads plan.props into d->props once; 0, or -1 with a Python error; GIL held. */
int read_props_once(FilterData *d, const VSAPI *vsapi);

/* Whether d->props is read (and so final); safe without the GIL. */
int props_have_been_read(const FilterData *d);

#endif
