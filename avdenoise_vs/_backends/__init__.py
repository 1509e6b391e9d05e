"""The backends that run a pass on a window of planes: the NumPy reference, the CUDA one, the lazy
one that becomes either, and the interface they share.
"""
