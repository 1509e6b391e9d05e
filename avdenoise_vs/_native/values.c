/*
 * Values between VapourSynth and Python for the bridge (values.h): a call's arguments as a
 * dict of lists, and a plan's frame properties as a VSMap.
 */
#include "values.h"

static PyObject *video_info_dict(const VSVideoInfo *vi) {
    return Py_BuildValue("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:L,s:L}",
        "width", vi->width, "height", vi->height, "num_frames", vi->numFrames,
        "color_family", vi->format.colorFamily, "sample_type", vi->format.sampleType,
        "bits", vi->format.bitsPerSample, "subsampling_w", vi->format.subSamplingW,
        "subsampling_h", vi->format.subSamplingH, "num_planes", vi->format.numPlanes,
        "fps_num", (long long)vi->fpsNum, "fps_den", (long long)vi->fpsDen);
}

/* One argument as a list of Python values; clips become dicts of their video info. Values of
 * other types (frames, functions, audio) can only reach an argument the signature does not
 * declare (its trailing `any`): they arrive as None, and Python reports the argument's name. */
static PyObject *argument_values(const VSMap *in, const char *key, const VSAPI *vsapi) {
    int count = vsapi->mapNumElements(in, key);
    int type = vsapi->mapGetType(in, key);
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < count; i++) {
        PyObject *item = NULL;
        if (type == ptInt) {
            item = PyLong_FromLongLong(vsapi->mapGetInt(in, key, i, NULL));
        } else if (type == ptFloat) {
            item = PyFloat_FromDouble(vsapi->mapGetFloat(in, key, i, NULL));
        } else if (type == ptData) {
            item = PyUnicode_DecodeUTF8(vsapi->mapGetData(in, key, i, NULL),
                                        vsapi->mapGetDataSize(in, key, i, NULL), "replace");
        } else if (type == ptVideoNode) {
            VSNode *node = vsapi->mapGetNode(in, key, i, NULL);
            item = video_info_dict(vsapi->getVideoInfo(node));
            vsapi->freeNode(node);
        } else {
            item = Py_BuildValue("");
        }
        if (!item || PyList_Append(list, item) < 0) Py_CLEAR(list);
        Py_XDECREF(item);
    }
    return list;
}

PyObject *arguments_dict(const VSMap *in, const VSAPI *vsapi) {
    PyObject *args = PyDict_New();
    int keys = vsapi->mapNumKeys(in);
    for (int k = 0; args && k < keys; k++) {
        const char *key = vsapi->mapGetKey(in, k);
        PyObject *values = argument_values(in, key, vsapi);
        if (!values || PyDict_SetItemString(args, key, values) < 0) Py_CLEAR(args);
        Py_XDECREF(values);
    }
    return args;
}

int props_to_map(PyObject *props, VSMap **map, const VSAPI *vsapi) {
    Py_ssize_t position = 0;
    PyObject *key, *value;
    if (!PyDict_Check(props)) {
        PyErr_SetString(PyExc_TypeError, "bridge: plan.props must be a dict");
        return -1;
    }
    while (PyDict_Next(props, &position, &key, &value)) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8AndSize(key, NULL) : NULL;
        if (!*map) *map = vsapi->createMap();
        if (name && PyLong_Check(value)) {
            long long number = PyLong_AsLongLong(value);
            if (!PyErr_Occurred()) vsapi->mapSetInt(*map, name, number, maReplace);
        } else if (name && PyFloat_Check(value)) {
            vsapi->mapSetFloat(*map, name, PyFloat_AsDouble(value), maReplace);
        } else if (name && PyUnicode_Check(value)) {
            Py_ssize_t size = 0;
            const char *text = PyUnicode_AsUTF8AndSize(value, &size);
            if (text) vsapi->mapSetData(*map, name, text, (int)size, dtUtf8, maReplace);
        } else if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "bridge: plan.props must map strings to ints, floats or strings");
        }
        if (PyErr_Occurred()) return -1;
    }
    return 0;
}
