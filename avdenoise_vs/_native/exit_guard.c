/* The bridge's guard for the interpreter's exit (the contract is in exit_guard.h). */
#define _GNU_SOURCE /* dladdr, RTLD_NODELETE */
#include "exit_guard.h"

#include <dlfcn.h>
#include <time.h>

/* The interpreter's exit: frames still in flight (a script that stops iterating clip.frames())
 * must not take the GIL once Python finalises, which ends or crashes the thread that tries,
 * nor run a host step on buffers that went with the plan. An atexit callback sets
 * `python_exiting`, then waits, the GIL released, until no frame is between its check of the
 * flag and the end of its host step (`frames_in_python`); frames that come later fail with an
 * error instead of entering Python. Sequentially consistent atomics:
 * a frame either sees the flag or the callback sees its count. */
static int python_exiting, frames_in_python;
#define EXIT_WAIT_MS 5000

int enter_python(void) {
    __atomic_add_fetch(&frames_in_python, 1, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n(&python_exiting, __ATOMIC_SEQ_CST)) return 1;
    __atomic_sub_fetch(&frames_in_python, 1, __ATOMIC_SEQ_CST);
    return 0;
}

void leave_python(void) { __atomic_sub_fetch(&frames_in_python, 1, __ATOMIC_SEQ_CST); }

static PyObject *on_python_exit(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    __atomic_store_n(&python_exiting, 1, __ATOMIC_SEQ_CST);
    Py_BEGIN_ALLOW_THREADS
    for (int ms = 0; ms < EXIT_WAIT_MS && __atomic_load_n(&frames_in_python, __ATOMIC_SEQ_CST);
         ms++) {
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef exit_method = {"avdenoise_bridge_exit", on_python_exit, METH_NOARGS, NULL};

/* Keeps this library mapped once loaded: VapourSynth unloads plugins with the core, and the
 * atexit callback (code of this library) may run after that. */
static int stay_loaded(void) {
    Dl_info info;
    if (!dladdr((void *)&stay_loaded, &info) || !info.dli_fname) return 0;
    return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) != NULL;
}

/* Hands on_python_exit to avdenoise_vs._exit_guard, which registers it with atexit and keeps
 * it ahead of the callbacks registered after it (CuPy's); at plugin load, the GIL held, once
 * per process. A failure only costs the guard, so it is cleared. */
void register_exit_guard(void) {
    static int registered;
    if (registered || !stay_loaded()) return;
    registered = 1;
    PyObject *callback = PyCFunction_New(&exit_method, NULL);
    PyObject *module = callback ? PyImport_ImportModule("avdenoise_vs._exit_guard") : NULL;
    PyObject *done = module ? PyObject_CallMethod(module, "register", "O", callback) : NULL;
    if (!done) PyErr_Clear();
    Py_XDECREF(done);
    Py_XDECREF(module);
    Py_XDECREF(callback);
}
