"""The cross-process warm-up queue: the first process to need a set of kernels compiles them
under a lock beside CuPy's kernel cache, the others wait and then load the warm cache, and a
stamp lets later processes skip the lock.

``queue.py`` is the queue itself (`warm_up`, `WarmUp`, the key); ``cache.py`` finds CuPy's cache
folder and what it holds; ``files.py`` the lock and stamp files; ``report.py`` the per-process
report of the queue's outcomes that ``prewarm`` and the fleet benchmarks read
(``AVDENOISE_WARMUP_REPORT``).
"""
