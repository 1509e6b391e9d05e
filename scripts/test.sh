#!/usr/bin/env bash
# The test suite: install into .venv with the test extras, then run pytest (GPU tests skip without a GPU).
source "$(dirname "$0")/_venv.sh" "[test]"
.venv/bin/python -m pytest "$@"
