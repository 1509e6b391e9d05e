#!/usr/bin/env bash
# The main job: install into .venv, denoise the built-in sample clip with vspipe, print PSNR and fps.
# Arguments: demo.py's (--length, --device, --out; see --help).
venv_extra=""
source "$(dirname "$0")/_venv.sh"
.venv/bin/python scripts/demo.py --vspipe .venv/bin/vspipe "$@"
