#!/usr/bin/env bash
# Two builds of ours in one call, taken in turn: the package installed in SITE (A) and WHEEL (B).
#   bash scripts/bench/wheel_ab.sh SITE WHEEL [ROUNDS] -- COMMAND ...    (--help prints this)
# PYTHON (default python3) is the interpreter whose pip unpacks WHEEL.
# Runs COMMAND ROUNDS times (default 2) with A live, then with B, alternating A B A B, so that a
# before/after comparison (e.g. a commit before a change against the tree after it) shares the
# machine's drift. B replaces A in SITE itself, by moving `avdenoise_vs/` and
# `vapoursynth/plugins/avdenoise/` aside: VapourSynth, its config and every rival stay as they
# are, where a second site would need its own vapoursynth config. SITE gets A back when the
# script ends, however it ends. In COMMAND, the words {build} and {round} become A or B and the
# round's number: e.g.
#   bash scripts/bench/wheel_ab.sh /tmp/site old.whl -- python3 scripts/bench/bench_fleet.py \
#       --cases "V-BM3D r1 YUV444" --plugins avdenoise --cache warm --markdown out/ab-{build}{round}.md
# Each run's first line names the build that is live (the package's first files), so that a
# table can be checked against the build it came from.
set -uo pipefail
case ${1:-} in -h | --help | "") sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
site=$1 wheel=$2; shift 2
rounds=2
if [[ ${1:-} != -- ]]; then rounds=$1; shift; fi
[[ ${1:-} == -- ]] || { echo "wheel_ab: COMMAND must follow --" >&2; exit 2; }
shift
[[ -d $site/avdenoise_vs ]] || { echo "wheel_ab: $site holds no avdenoise_vs" >&2; exit 2; }
[[ -f $wheel ]] || { echo "wheel_ab: no wheel $wheel" >&2; exit 2; }
PARTS=(avdenoise_vs vapoursynth/plugins/avdenoise)
other=$(mktemp -d)
"${PYTHON:-python3}" -m pip install -q --no-index --no-deps --no-compile --target "$other" "$wheel" || exit 1
live=A
swap() {  # exchange the live build's parts with the other's
    local part
    for part in "${PARTS[@]}"; do
        [[ -e $other/$part ]] || continue
        mkdir -p "$(dirname "$site/$part")"
        mv "$site/$part" "$other/$part.swap" && mv "$other/$part" "$site/$part" \
            && mv "$other/$part.swap" "$other/$part"
    done
    if [[ $live == A ]]; then live=B; else live=A; fi
}
restore() { [[ $live == A ]] || swap; rm -rf "$other"; }
trap restore EXIT
trap 'exit 130' INT TERM
for round in $(seq "$rounds"); do
    for build in A B; do
        [[ $live == "$build" ]] || swap
        echo "## build $build, round $round: $(ls "$site/avdenoise_vs" | head -6 | tr '\n' ' ')"
        words=()
        for word in "$@"; do
            word=${word//\{build\}/$build}
            words+=("${word//\{round\}/$round}")
        done
        "${words[@]}"
    done
done
