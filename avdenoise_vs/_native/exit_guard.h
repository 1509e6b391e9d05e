/*
 * The interpreter's exit, for bridge.c: a frame enters Python (and runs its host step, whose
 * buffers go with the interpreter) only between enter_python() returning 1 and leave_python();
 * once Python has begun to exit, enter_python() returns 0 and the frame fails with an error.
 * register_exit_guard() installs the atexit callback that waits for the frames inside
 * (exit_guard.c), once per process, the GIL held.
 */
#ifndef AVDENOISE_EXIT_GUARD_H
#define AVDENOISE_EXIT_GUARD_H

#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030C0000
#endif
#include <Python.h>

int enter_python(void);
void leave_python(void);
void register_exit_guard(void);

#endif
