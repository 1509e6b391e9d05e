"""NLM on CUDA: the kernel source template (nlm.cuh) and the pass that launches it."""
