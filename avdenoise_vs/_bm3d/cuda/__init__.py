"""BM3D on CUDA: the kernel sources (bm3d_*.cuh), their launch records and the spatial and temporal
schedules.
"""
