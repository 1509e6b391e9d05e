# Sourced by demo.sh and test.sh: create .venv with Python >= 3.12 and install the project.
# Usage: source scripts/_venv.sh [pip extra, e.g. "[test]"]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
find_python() {
    for candidate in "${PYTHON:-}" python3.12 python3.13 python3.14 python3; do
        [ -n "$candidate" ] || continue
        command -v "$candidate" >/dev/null 2>&1 || continue
        if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            echo "$candidate"; return 0
        fi
    done
    # pyenv keeps other versions beside the global one; .python-version names the project's.
    for candidate in "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3; do
        [ -x "$candidate" ] && { echo "$candidate"; return 0; }
    done
    echo "Python >= 3.12 is needed (VapourSynth's wheels are cp312-abi3); set PYTHON=..." >&2
    return 1
}
if [ ! -x .venv/bin/python ]; then
    "$(find_python)" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q ".${1:-}"
# vspipe finds its Python through a config file written once per Python install.
.venv/bin/vapoursynth config >/dev/null
export PATH="$PWD/.venv/bin:$PATH"
