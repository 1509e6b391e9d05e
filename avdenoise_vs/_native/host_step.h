/*
 * The host step: the part of a frame that a plan hands back to be done natively, after the GIL
 * is released, so that a frame takes the GIL once (each take costs a wait under many threads,
 * see docs/BENCHMARKS.md). It launches nothing itself: it waits on a function the plan names
 * (the driver's stream synchronisation) and copies planes between VapourSynth's frames and
 * buffers the plan owns. bridge.c calls it; the plans that return host steps are the CUDA
 * backend's (avdenoise_vs/_cuda/transfer/staged.py).
 *
 * What Python hands over: plan.process returns None (the frame is done) or the tuple
 *   (wait_address, wait_argument, out_copies, next_staging[, done_address])
 *   wait_address: 0, or an `int (*)(void *)` called with wait_argument (0 = success), such as
 *       the driver's cuStreamSynchronize; the copies wait for it.
 *   out_copies: ((plane, address, stride), ...) rows copied into the output frame's plane, a
 *       plane the filter does not pass through from its centre frame.
 *   next_staging: ((input, plane, address, stride), ...) where, before this thread's next
 *       frame of this filter takes the GIL, that plane of input's centre frame is copied; that
 *       frame then reaches Python as None instead of its planes.
 *   done_address: 0, or the address of an int that C sets to 1 (a release store) once the
 *       wait and out_copies have succeeded: the plan may then lend the buffers they read to
 *       another frame without this thread calling back into Python.
 *
 * What C does per frame, in bridge.c's order:
 *   1. host_step_stage, without the GIL: the copies the thread's last host step of this
 *      filter asked for, into the plan's buffers; `staged` marks the inputs they covered.
 *   2. host_step_read, under the GIL, right after plan.process returns: checks the tuple
 *      (planes, inputs, counts) and keeps next_staging for step 1 of the thread's next frame.
 *   3. host_step_run, without the GIL: the wait, then out_copies into the output frame.
 *
 * Who owns what: the plan owns every address in a host step (the wait function and the
 * buffers); they must stay valid until the thread's next frame of the filter has been staged
 * (the plan keeps them per thread). VapourSynth owns the frames; nothing here frees anything.
 *
 * Threading: a host step is one VapourSynth worker thread's, for one frame. The staging
 * requests are kept per thread (thread-local records, indexed by filter id) and each covers
 * one frame; filters are told apart by an id that is never reused, not by address, which a
 * freed filter's successor may take. No lock is needed: a record is only touched by its
 * thread. A request lost to a record collision only costs that frame its early copy (the
 * frame then reaches Python with its planes).
 */
#ifndef AVDENOISE_HOST_STEP_H
#define AVDENOISE_HOST_STEP_H

#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030C0000
#endif
#include <Python.h>
#include <stddef.h>

#include "VapourSynth4.h"

#define MAX_INPUTS 4 /* clips a filter reads: the clip, and `ref` */

typedef struct {
    int input, plane;
    char *address;
    ptrdiff_t stride;
} PlaneCopy;

/* Steps 1 and 3 of a frame (see above), read from plan.process's result. */
typedef struct {
    int (*wait)(void *);
    void *wait_argument;
    int num_out;
    PlaneCopy out[3];
    int *done;
} HostStep;

/* Step 1: copies the planes that this thread's last host step of filter `filter_id` asked for
 * from `centres[input]` and sets `staged[input]` for each input copied. */
void host_step_stage(unsigned long long filter_id, const VSFrame *const centres[MAX_INPUTS],
                     int staged[MAX_INPUTS], const VSAPI *vsapi);

/* Step 2, under the GIL: reads plan.process's `result` into `step` and this thread's staging
 * requests; the filter has `num_inputs` clips and `num_planes` planes, of which those with
 * `copy_plane[p]` set are passed through. 0, or -1 with a Python error set. */
int host_step_read(PyObject *result, unsigned long long filter_id, int num_inputs,
                   int num_planes, const int copy_plane[3], HostStep *step);

/* Step 3: waits, then copies into `dst`; 0, or -1 with a message in `error`. */
int host_step_run(const HostStep *step, VSFrame *dst, char *error, size_t error_size,
                  const VSAPI *vsapi);

#endif
