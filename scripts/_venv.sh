# Sourced by demo.sh and test.sh: create .venv with Python >= 3.12 and install the project.
# Usage: venv_extra="[test]" (a pip extra, or empty for the plain install); source scripts/_venv.sh
# The extra comes in a variable: a sourced script sees its caller's arguments as $1..., and
# demo.sh's arguments are demo.py's.
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
# What pip would build: the files of the package and its build set-up (not build outputs).
source_hash() {
    find avdenoise_vs setup.py pyproject.toml README.md -type f \
        ! -path '*/__pycache__/*' ! -name '*.so' -print0 \
        | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1
}
# Each line of the stamp is "<source hash> <extra>", one per extra installed from that source;
# any extra includes the plain install.
stamp=.venv/.avdenoise-installed
hash="$(source_hash)"
extra="${venv_extra:-}"
installed() {
    [ -f "$stamp" ] || return 1
    if [ -z "$extra" ]; then grep -q "^$hash " "$stamp"; else grep -qxF "$hash $extra" "$stamp"; fi
}
if installed; then
    echo "avdenoise-vs${extra} is installed from this source already: pip skipped" \
        "(delete $stamp to reinstall)" >&2
else
    grep -q "^$hash " "$stamp" 2>/dev/null || rm -f "$stamp"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q ".$extra"
    echo "$hash $extra" >>"$stamp"
fi
# vspipe finds its Python through a config file written once per Python install.
.venv/bin/vapoursynth config >/dev/null
export PATH="$PWD/.venv/bin:$PATH"
