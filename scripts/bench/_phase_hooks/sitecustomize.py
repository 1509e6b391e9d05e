"""Start-up phase marks for the fleet benchmarks, made from outside the package.

``_fleet.worker_env`` puts this folder first on a worker's ``PYTHONPATH`` and names the
worker's report folder in ``AVDENOISE_BENCH_PHASES``. Python imports this module as it starts
(``site``); with the variable set, it wraps functions of the package as their modules are
imported, and each mark appends ``<phase> <time.time()>`` to ``phases-<pid>`` in that folder,
which ``_fleet.read_phases`` turns into seconds from the worker's launch.

=============  =====================================================================
phase          marked at
=============  =====================================================================
import         the end of ``avdenoise_vs``'s import
backend-NAME   the call of ``_backends.select._chosen``: a filter got backend NAME
script         the call of ``_backends.select._build`` for a GPU backend: the script
               has been evaluated up to the filter
cupy           the end of ``cupy``'s import (the nearest boundary to the line after
               ``import cupy`` in ``_backends.cuda.device.open_device``; once a process)
context        the return of ``_cuda.context.EarlyContext._run`` when it retained the
               primary context (the thread's last step)
cuda           the return of ``_build`` for a GPU backend: the backend is made
modules        the return of ``CudaBackend._prepare_passes``: every pass's kernels
               compiled or loaded
warm-frame     the return of ``CudaBackend.warm_up``: the synthetic frame is done (and,
               the nearest boundary, dropped from the frame cache)
warm           the return of ``_backends.select._warm_up`` for a warm GPU backend: the
               kernels and the threads' states are ready
thread-state   the return of ``CudaBackend._make_state``: one thread's state made
first-frame    the call of ``CudaBackend._new_state`` while no state made ahead
               (``prepare_threads``) has been taken, or none is left
=============  =====================================================================

A wrapper calls the function with the same arguments and returns or raises what it does; the
mark is made beside the call, and a mark or a patch that fails is dropped (a patch that fails
says so on stderr), so nothing here raises into a render. Nothing here imports the package or
CuPy: a module is patched by the import system (a meta path finder) right after it runs, before
another module binds its names. Taking the name ``sitecustomize``, this module runs the one it
hides (a distribution's), if any.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import os
import sys
import time
import weakref

PHASES_ENV = "AVDENOISE_BENCH_PHASES"
"""The environment variable naming the folder of the ``phases-<pid>`` files."""

#: States each backend made ahead of its threads' first frames (``prepare_threads``).
_made_ahead: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def mark(phase: str) -> None:
    """Append ``<phase> <time.time()>`` to this process's ``phases-<pid>``; never raises."""
    line = f"{phase} {time.time():.6f}\n".encode()
    try:
        folder = os.environ[PHASES_ENV]
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"phases-{os.getpid()}")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, line)  # one write: threads' lines never interleave
        finally:
            os.close(fd)
    except Exception:
        pass


def _quietly(step, *args) -> None:
    try:
        step(*args)
    except Exception:
        pass


def _wrap(owner, name: str, before=None, after=None) -> None:
    """Replace ``owner.name`` by a function calling ``before(args)``, the function, then
    ``after(args, result)`` when it returned."""
    function = getattr(owner, name)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if before is not None:
            _quietly(before, args)
        result = function(*args, **kwargs)
        if after is not None:
            _quietly(after, args, result)
        return result

    setattr(owner, name, wrapper)


def _patch_select(select) -> None:
    def building(args) -> None:
        if args[0] != "cpu":
            mark("script")

    def built(args, _backend) -> None:
        if args[0] != "cpu":
            mark("cuda")

    def warm(args, cause) -> None:
        if cause is None and hasattr(args[0], "kernel_specs"):
            mark("warm")

    _wrap(select, "_chosen", before=lambda args: mark(f"backend-{args[0]}"))
    _wrap(select, "_build", before=building, after=built)
    _wrap(select, "_warm_up", after=warm)


def _patch_context(context) -> None:
    def ran(args, _none) -> None:
        if args[0]._retained:
            mark("context")

    _wrap(context.EarlyContext, "_run", after=ran)


def _patch_backend(backend) -> None:
    def first(args) -> None:
        spares = args[0]._spare_states
        if not spares or len(spares) == _made_ahead.get(args[0], 0):
            mark("first-frame")

    def made_ahead(args, _none) -> None:
        _made_ahead[args[0]] = len(args[0]._spare_states)

    cls = backend.CudaBackend
    _wrap(cls, "_prepare_passes", after=lambda args, _: mark("modules"))
    _wrap(cls, "warm_up", after=lambda args, _: mark("warm-frame"))
    _wrap(cls, "prepare_threads", after=made_ahead)
    _wrap(cls, "_new_state", before=first)
    _wrap(cls, "_make_state", after=lambda args, _: mark("thread-state"))


#: What to do to each module right after it runs.
PATCHES = {
    "avdenoise_vs": lambda module: mark("import"),
    "avdenoise_vs._backends.select": _patch_select,
    "avdenoise_vs._backends.cuda.backend": _patch_backend,
    "avdenoise_vs._cuda.context": _patch_context,
    "cupy": lambda module: mark("cupy"),
}


class _Loader:
    """Another loader's module, patched once it has run; the module sees only that loader."""

    def __init__(self, loader, patch) -> None:
        self._loader, self._patch = loader, patch

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        try:
            self._patch(module)
        except Exception as error:
            print(f"phase hooks: {module.__name__} not patched ({error!r})", file=sys.stderr)


class _Finder:
    """Finds the modules of `PATCHES` through the other finders, and patches them."""

    def find_spec(self, name, path, target=None):
        patch = PATCHES.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = None if finder is self or find is None else find(name, path, target)
            if spec is not None:
                if hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, patch)
                return spec
        return None


def _run_hidden_sitecustomize() -> None:
    """Run the ``sitecustomize`` further down ``sys.path`` that this module hides, if any."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


if os.environ.get(PHASES_ENV):
    sys.meta_path.insert(0, _Finder())
_run_hidden_sitecustomize()
