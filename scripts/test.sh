#!/usr/bin/env bash
# The test suite: install into .venv with the test extras, then run pytest (GPU tests skip without a GPU).
venv_extra="[test]"
source "$(dirname "$0")/_venv.sh"
.venv/bin/python -m pytest "$@"
