"""The NumPy BM3D / V-BM3D (Dabov et al. 2007; Dabov, Foi, Egiazarian 2007): the oracle for the
CUDA kernels.
"""
