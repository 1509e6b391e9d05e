/*
 * GPU frames for the bridge: clips that live on VapourSynth's Vulkan device (R80+, VSVulkan4.h)
 * go through the filter on the device, their planes handed to Python as exported memory in
 * place of host pointers, and come back as fresh GPU frames. Generic, as bridge.c is: it knows
 * planes, not denoising. docs/GPU_FRAMES.md has the API and the design.
 *
 * Built only where the build's vapoursynth ships VSVulkan4.h (setup.py then defines
 * AVDENOISE_GPU_FRAMES and AVDENOISE_VS_RELEASE, and writes a stand-in vulkan_core.h); elsewhere
 * the functions below are stubs that leave every clip a CPU clip. Used only where the running
 * library's API version and release are those it was built against: the VSVULKANAPI table has
 * no stable layout (VSVulkan4.h's first comment), so any other library keeps today's path, and
 * the core downloads GPU clips before the filter as it does for any plain `vnode` argument.
 *
 * What Python sees (bridge.c's contract, with these differences):
 *   create(name, args): every clip's dict has "gpu" (bool); a GPU clip's also "vulkan_uuid"
 *       (the device's UUID, 32 hex digits, as CUDA reports it) and "vulkan_export" (the
 *       VkExternalMemoryHandleTypeFlagBits its planes export as; 1 = opaque fd, 0 = none).
 *   plan.process(n, frame_numbers, windows, dst) for a filter of GPU clips:
 *       windows[i][t][plane] = (fd, memory_id, memory_size, offset, stride): the plane lies at
 *       `offset` in the allocation `memory_id` of `memory_size` bytes, exported as the opaque
 *       file descriptor `fd`, its rows `stride` bytes apart (the CPU plane's layout); window
 *       positions that repeat a frame (the clip's ends) repeat its tuple;
 *       dst[plane] likewise for every plane of a fresh GPU frame, passed-through planes
 *       (plan.copy_planes) included: the plan copies those from the centre frame of the first
 *       input, on the device.
 *       It returns None once its device work on these planes has finished (the host
 *       synchronised): the bridge then returns the frame as it is, publishing nothing.
 *   A filter whose every plane is passed through calls no plan.process: its frames share the
 *   centre frame's planes, as on the CPU.
 *
 * Who owns what: the bridge owns every fd it hands over and closes them all once plan.process
 * has returned. An importer imports a duplicate (os.dup), which a successful import consumes
 * and a failed one leaves to close; the import outlives the fd. Inputs are taken with
 * getExportableFrameFilter and waited for with waitGPUFrame before Python sees them, and held
 * until plan.process has returned.
 *
 * Failures (a frame that cannot be taken for export, an export, the wait) become the frame's
 * error, "avdenoise.<Filter>: ...", never a crash.
 */
#ifndef AVDENOISE_GPU_FRAMES_H
#define AVDENOISE_GPU_FRAMES_H

#include "frame_steps.h"

#ifdef AVDENOISE_GPU_FRAMES

/* At registration, the GIL held: 1 where GPU frames are usable (the running library's API
 * version and release are the built ones), else 0. */
int gpu_frames_init(const VSPLUGINAPI *vspapi);

/* Adds the residency keys to every clip dict of `args` (arguments_dict's, for `in`); 0, or -1
 * with a Python error. The GIL held. */
int gpu_frames_mark(PyObject *args, const VSMap *in, const char *name, VSCore *core,
                    const VSAPI *vsapi);

/* 1 when every input of `d` is a GPU clip, 0 when none is, -1 when they are mixed. */
int gpu_frames_residency(const FilterData *d, const VSAPI *vsapi);

/* Creates the filter of GPU clips `d` into `out` (it returns GPU frames). */
void gpu_frames_create(VSMap *out, FilterData *d, VSFilterFree free_filter,
                       const VSFilterDependency *deps, VSCore *core, const VSAPI *vsapi);

#else /* no VSVulkan4.h at build time: no GPU clip ever reaches the bridge */

static inline int gpu_frames_init(const VSPLUGINAPI *vspapi) {
    (void)vspapi;
    return 0;
}

static inline int gpu_frames_mark(PyObject *args, const VSMap *in, const char *name,
                                  VSCore *core, const VSAPI *vsapi) {
    (void)args, (void)in, (void)name, (void)core, (void)vsapi;
    return 0;
}

static inline int gpu_frames_residency(const FilterData *d, const VSAPI *vsapi) {
    (void)d, (void)vsapi;
    return 0;
}

static inline void gpu_frames_create(VSMap *out, FilterData *d, VSFilterFree free_filter,
                                     const VSFilterDependency *deps, VSCore *core,
                                     const VSAPI *vsapi) {
    (void)out, (void)d, (void)free_filter, (void)deps, (void)core, (void)vsapi;
}

#endif
#endif
