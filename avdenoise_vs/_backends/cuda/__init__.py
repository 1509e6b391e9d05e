"""The CUDA backend: opening the device, fitting the NLM and BM3D passes to it, compiling their
kernels ahead of the context, and the frame path through the CUDA runtime
(`avdenoise_vs._cuda`).
"""
