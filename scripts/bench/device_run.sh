#!/usr/bin/env bash
# One call on a GPU machine: install, test, benchmarks, fleets, each step's log and tables in $OUT.
#   bash scripts/bench/device_run.sh [STEP ...]      (from any folder; --help prints this)
# Steps (default: tests bench bm3d quality fleet):
#   tests      the GPU-side test suites
#   doctor     python -m avdenoise_vs doctor
#   bench      NLM speed, scripts/bench/bench_nlm.py (BENCH_CASES, BENCH_PLUGINS)
#   bm3d       BM3D speed, scripts/bench/bench_bm3d.py (BENCH_BM3D_CASES, BENCH_BM3D_PLUGINS;
#              case names contain commas, see its --help); both BENCH_SECONDS and BENCH_REPEAT
#              (vspipe runs a cell, median)
#   quality    the GPU columns of docs/BM3D_QUALITY.md (ours, BM3DCUDA, vszipcu), merged into
#              the CPU report; copy $OUT/BM3D_QUALITY.md and .png into docs/ afterwards
#   bm3dcache  V-BM3D's memory and speed against AVDENOISE_DEBUG's bm3d_cache (BM3D_CACHE_SIZES)
#   ab         A/B runs of AVDENOISE_DEBUG settings, each against the rival in the same call:
#              NLM transfers at Y d0, spatial BM3D workspaces (AB_SECONDS, AB_REPEAT)
#   benchfleet the Av1an-style headline, scripts/bench/bench_fleet.py: FLEET_WORKERS vspipe
#              workers x FLEET_CHUNK frames at once per case and plugin, ours cold and warm;
#              FLEET_CASES (name substrings, comma-separated; default the headline rows),
#              FLEET_PLUGINS, FLEET_REPEAT, FLEET_MPS=1 (a CUDA MPS daemon meanwhile),
#              FLEET_TIMEOUT (s a fleet), FLEET_BUDGET (s: no fleet starts after it, so that the
#              call ends in time), FLEET_ARGS (more options, split on spaces: --cache warm);
#              writes fleet.json, fleet.md and benchfleet.log (progress)
#   headline   every row of the headline table against the rivals its columns name, in
#              FLEET_REPEAT (2) rounds of single fleets taken in turn (NLM rows; BM3D radius 0;
#              V-BM3D), so that a row's cells are the mean of its rounds; headline-<part>-<round>
#   startab    where a worker's start goes: ours under each of START_VARIANTS (space-separated;
#              each variable assignments joined by '+', e.g. AVDENOISE_CUDA_SYNC=block+X=1) on
#              START_CACHE (warm), and START_RIVALS once, for START_CASES (bench_fleet names)
#   fleet      scripts/bench/fleet.py on fleet_nlm.vpy: a lone cold worker, then FLEET_SIZES
#              workers cold with the warm-up queue on and off, and warm (FLEET_REPEAT runs each)
#   floor      what a fleet pays before denoising: workers without the filter, and with CUDA up
#   memory     a lone worker's GPU memory per BM3D case and its parts, scripts/bench/gpu_memory.py;
#              gpu_memory.json
#   gpuchain   a 1080p Vulkan chain around ours on GPU frames, through the host, and vsfeel's,
#              scripts/bench/gpu_chain_bench.py (GPU_CHAIN_FRAMES, GPU_CHAIN_CASES); gpu_chain.json
# bm3dcache, ab and startab add their key to any AVDENOISE_DEBUG already set.
# The machine (every setting has a default; none names one machine):
#   OUT           folder of the logs and tables (default: out)
#   PYTHON        the interpreter that has, or gets, the package and the rivals (default: python3)
#   DEVICE_SETUP  a script sourced first, with RIVALS as its argument, that installs the package
#                 and the rivals and exports their paths (default: .device/device_setup.sh, made
#                 as docs/BENCHMARKS.md says); set it empty where they are installed already
#   RIVALS        the folder of wheels and plugins DEVICE_SETUP installs (default: .device/rivals)
#   FLEET_WORKERS workers of a fleet (default 16, the published tables' count)
#   FLEET_GPUS    GPUs a fleet spreads over, bench_fleet.py's --gpus (default 1)
#   WARM_CACHE    CuPy kernel cache of the warm runs (default: a new folder under $TMPDIR)
set -uo pipefail
case ${1:-} in -h | --help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
ALL_STEPS="tests doctor bench bm3d quality bm3dcache ab benchfleet headline startab fleet floor gpuchain memory"
steps=${*:-tests bench bm3d quality fleet}
for step in $steps; do
    [[ " $ALL_STEPS " == *" $step "* ]] || { echo "unknown step $step: one of $ALL_STEPS" >&2; exit 2; }
done
has() { [[ " $steps " == *" $1 "* ]]; }  # whole step names: bm3d is not bm3dcache
# Each comparison run adds its key=value to the caller's AVDENOISE_DEBUG, if any.
debug() { echo "${AVDENOISE_DEBUG:+$AVDENOISE_DEBUG,}$1"; }
export PYTHONUNBUFFERED=1
# $OUT is taken from the caller's folder; the steps run from the checkout's root.
mkdir -p "${OUT:-out}" && out=$(cd "${OUT:-out}" && pwd) || exit 1
cd "$(dirname "$0")/../.." || exit 1
py=${PYTHON:-python3}
workers=${FLEET_WORKERS:-16}
gpus=(--gpus "${FLEET_GPUS:-1}")
warm_cache=${WARM_CACHE:-}
if [[ -z $warm_cache ]]; then
    warm_cache=$(mktemp -d) && trap 'rm -rf "$warm_cache"' EXIT
fi
setup=${DEVICE_SETUP-.device/device_setup.sh}
if [[ -n $setup ]]; then
    # shellcheck disable=SC1090  # the machine's own set-up
    source "$setup" "${RIVALS:-.device/rivals}" || { echo "install failed: $setup" >&2; exit 1; }
fi
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
else
    echo "no nvidia-smi on PATH"
fi
"$py" -c "import cupy, vapoursynth as vs; print('cupy', cupy.__version__, 'VS', vs.core.core_version)"

if has tests; then
    "$py" -m pytest -q -x -p no:cacheprovider tests/cuda tests/native tests/test_denoise.py \
        tests/test_nlmeans.py tests/test_vspipe.py 2>&1 | tee "$out/tests.log" | tail -15
fi
if has gpuchain; then
    "$py" scripts/bench/gpu_chain_bench.py --frames "${GPU_CHAIN_FRAMES:-600}" \
        ${GPU_CHAIN_CASES:+--cases "$GPU_CHAIN_CASES"} --json "$out/gpu_chain.json" \
        2>&1 | tee "$out/gpu_chain.log" | tail -20
fi
if has memory; then
    "$py" scripts/bench/gpu_memory.py --json "$out/gpu_memory.json" 2>&1 | tee "$out/gpu_memory.log"
fi
if has doctor; then
    "$py" -m avdenoise_vs doctor > "$out/doctor.txt" 2>&1; echo "doctor exit $?"; tail -8 "$out/doctor.txt"
fi
if has bench; then
    "$py" scripts/bench/bench_nlm.py --seconds "${BENCH_SECONDS:-2}" --repeat "${BENCH_REPEAT:-1}" \
        --json "$out/bench.json" \
        ${BENCH_CASES:+--cases "$BENCH_CASES"} ${BENCH_PLUGINS:+--plugins "$BENCH_PLUGINS"} \
        2>&1 | tee "$out/bench.log" | tail -40
fi
if has bm3d; then
    "$py" scripts/bench/bench_bm3d.py --seconds "${BENCH_SECONDS:-2}" --repeat "${BENCH_REPEAT:-1}" \
        --json "$out/bench_bm3d.json" \
        ${BENCH_BM3D_CASES:+--cases "$BENCH_BM3D_CASES"} \
        ${BENCH_BM3D_PLUGINS:+--plugins "$BENCH_BM3D_PLUGINS"} \
        2>&1 | tee "$out/bench_bm3d.log" | tail -40
fi
if has quality; then
    "$py" scripts/bench/bm3d_quality.py --size 96 --merge docs/BM3D_QUALITY.md \
        --backends avdenoise,avdenoise_bm3d,bm3dcuda,vszipcu --out "$out/BM3D_QUALITY.md" \
        2>&1 | tee "$out/quality.log" | tail -20
fi
if has bm3dcache; then
    # V-BM3D memory against cache size: fps, MiB and entries made per output frame (1.00 when
    # nothing is filtered twice), backend alone (scripts/bench/gpu_bm3d_check.py).
    for kept in ${BM3D_CACHE_SIZES:-19 12 9 7}; do
        echo "## AVDENOISE_DEBUG=bm3d_cache=$kept"
        AVDENOISE_DEBUG=$(debug bm3d_cache=$kept) "$py" scripts/bench/gpu_bm3d_check.py --frames 200 \
            --only "r1 yuv444,r1 yuv444 2 stages" --json "$out/bm3dcache-$kept.json"
    done 2>&1 | tee "$out/bm3dcache.log" | grep -E "^##|fps16"
fi
if has ab; then
    {
        ab=(--seconds "${AB_SECONDS:-2}" --repeat "${AB_REPEAT:-3}")
        for transfer in direct staged; do
            echo "## AVDENOISE_DEBUG=transfer=$transfer"
            AVDENOISE_DEBUG=$(debug transfer=$transfer) "$py" scripts/bench/bench_nlm.py "${ab[@]}" --plugins avdenoise \
                --cases "Y d0 a2 s4,Y d1 a2 s4,Y d1 a2 s4 16-bit,Y d1 a2 s4 4K"
        done
        echo "## rival"
        "$py" scripts/bench/bench_nlm.py "${ab[@]}" --plugins vszipcu --cases "Y d0 a2 s4"
        for workspaces in 4 6 8; do
            echo "## AVDENOISE_DEBUG=bm3d_workspaces=$workspaces"
            AVDENOISE_DEBUG=$(debug bm3d_workspaces=$workspaces) "$py" scripts/bench/bench_bm3d.py "${ab[@]}" \
                --plugins avdenoise --cases "radius 0, luma,radius 0, YUV444"
        done
        echo "## rival"
        "$py" scripts/bench/bench_bm3d.py "${ab[@]}" --plugins bm3dcuda --cases "radius 0, luma"
    } 2>&1 | tee "$out/ab.log" | grep -E "^##|^\| (Y|radius)"
fi
if has headline; then
    part() {  # part name, round, then bench_fleet's --cases and --plugins
        local name=$1 round=$2; shift 2
        "$py" scripts/bench/bench_fleet.py --workers "$workers" --chunk "${FLEET_CHUNK:-240}" "${gpus[@]}" \
            --repeat 1 --timeout "${FLEET_TIMEOUT:-40}" "$@" \
            --json "$out/headline-$name-$round.json" --markdown "$out/headline-$name-$round.md" \
            2>> "$out/headline.log"
        grep "^| [A-Za-z]" "$out/headline-$name-$round.md" | grep -v "^| case"
    }
    for round in $(seq "${FLEET_REPEAT:-2}"); do
        part nlm "$round" --cases "NLM Y" --plugins avdenoise,source,vszipcu,knlm,nlm_cuda
        part bm3d "$round" --cases "BM3D r0" --plugins avdenoise,source,vszipcu,bm3dcuda
        part vbm3d "$round" --cases "V-BM3D" --plugins avdenoise,source,vszipcu_fused
    done
fi
if has startab; then
    # One line per cell from scripts/bench/fleet_phases.py (variants: see the top of this file).
    base=(--workers "$workers" --chunk "${FLEET_CHUNK:-240}" "${gpus[@]}" --repeat "${FLEET_REPEAT:-2}"
          --timeout 120 --cases "${START_CASES:-BM3D r0,NLM Y d1}")
    if [[ -n ${START_RIVALS-source,bm3dcuda,vszipcu} ]]; then
        "$py" scripts/bench/bench_fleet.py "${base[@]}" --plugins "${START_RIVALS-source,bm3dcuda,vszipcu}" \
            --json "$out/start-rivals.json" >/dev/null 2>>"$out/startab.log"
    fi
    for variant in ${START_VARIANTS:-AVDENOISE_CUDA_SYNC=auto}; do
        env ${variant//+/ } "$py" scripts/bench/bench_fleet.py "${base[@]}" --plugins avdenoise \
            --cache "${START_CACHE:-warm}" --json "$out/start-${variant//[=,+]/_}.json" \
            >/dev/null 2>>"$out/startab.log"
    done
    "$py" scripts/bench/fleet_phases.py "$out"/start-*.json | tee "$out/startab.txt"
fi
fleet() { "$py" scripts/bench/fleet.py scripts/bench/fleet_nlm.vpy --encoder none --timeout 240 "$@"; }
if has floor; then
    # What a fleet pays before denoising: a lone warm worker, then $workers without the filter
    # (Python and VapourSynth only) and with CUDA started but no filter.
    {
        export CUPY_CACHE_DIR=$warm_cache
        fleet --workers 1 --frames 0:8 >/dev/null 2>&1
        echo "## lone warm worker"; fleet --workers 1 --frames 0:64 --json "$out/floor-1-warm.json"
        echo "## $workers workers, warm, queue on"
        fleet --workers "$workers" --frames 0:$((workers * 48)) --json "$out/floor-$workers-warm.json"
        unset CUPY_CACHE_DIR
        for stage in source cuda; do
            echo "## $workers workers, stage=$stage"
            fleet --workers "$workers" --frames 0:$((workers * 48)) --arg stage=$stage \
                --json "$out/floor-$workers-$stage.json"
        done
    } 2>&1 | tee "$out/floor.log" | grep -E "^##|^fleet" | head -40
fi
if has fleet; then
    # FLEET_REPEAT runs of each fleet (the slowest of the workers varies from run to run).
    {
        for r in $(seq "${FLEET_REPEAT:-1}"); do
            echo "## lone cold worker ($r)"
            fleet --workers 1 --frames 0:64 --cold --json "$out/fleet-1-r$r.json"
        done
        for n in ${FLEET_SIZES:-8 16}; do
            for r in $(seq "${FLEET_REPEAT:-1}"); do
                echo "## $n workers, cold, queue on ($r)"
                fleet --workers $n --frames 0:$((n * 48)) --cold --json "$out/fleet-$n-cold-on-r$r.json"
                echo "## $n workers, cold, queue off ($r)"
                fleet --workers $n --frames 0:$((n * 48)) --cold --queue off \
                    --json "$out/fleet-$n-cold-off-r$r.json"
                export CUPY_CACHE_DIR=$warm_cache
                fleet --workers 1 --frames 0:8 >/dev/null 2>&1
                echo "## $n workers, warm, queue on ($r)"
                fleet --workers $n --frames 0:$((n * 48)) --json "$out/fleet-$n-warm-on-r$r.json"
                unset CUPY_CACHE_DIR
            done
        done
    } 2>&1 | tee "$out/fleet.log" | grep -E "^##|^fleet: [0-9]" | head -80
fi
if has benchfleet; then
    mps=(); [[ ${FLEET_MPS:-0} == 1 ]] && mps=(--mps)
    "$py" scripts/bench/bench_fleet.py --workers "$workers" --chunk "${FLEET_CHUNK:-240}" "${gpus[@]}" \
        --cases "${FLEET_CASES:-NLM Y d1,BM3D r0,V-BM3D r1}" --repeat "${FLEET_REPEAT:-1}" \
        --timeout "${FLEET_TIMEOUT:-150}" --budget "${FLEET_BUDGET:-450}" "${mps[@]}" \
        ${FLEET_PLUGINS:+--plugins "$FLEET_PLUGINS"} ${FLEET_ARGS:-} \
        --json "$out/fleet.json" --markdown "$out/fleet.md" 2> "$out/benchfleet.log"
fi
