"""The VapourSynth side: the entry point the native bridge calls, clip layouts, pass plans and
filter creation.
"""
