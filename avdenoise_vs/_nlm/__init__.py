"""Non-local means: the maths both backends share, the NumPy reference and the CUDA kernels."""
