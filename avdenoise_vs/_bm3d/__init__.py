"""BM3D and V-BM3D: the maths both backends share (colour transform, noise levels, thresholds, 2D
transforms), the NumPy reference and the CUDA kernels.
"""
