/*
 * Values between VapourSynth and Python for the bridge (bridge.c); the GIL held for each.
 */
#ifndef AVDENOISE_VALUES_H
#define AVDENOISE_VALUES_H

#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030C0000
#endif
#include <Python.h>

#include "VapourSynth4.h"

/* A call's arguments as {name: [values]}; clips become dicts of their video info. NULL with a
 * Python error on failure. */
PyObject *arguments_dict(const VSMap *in, const VSAPI *vsapi);

/* Adds `props` (a dict of ints, floats and strings) to *map, made when NULL and a key comes;
 * 0, or -1 with a Python error. */
int props_to_map(PyObject *props, VSMap **map, const VSAPI *vsapi);

#endif
