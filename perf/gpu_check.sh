#!/usr/bin/env bash
# The GPU readiness check (issues 44, 54): one call on a bare GPU machine, run from the repository root
# with the carried folder perf/gpu_wheels.sh fills (.whl: the wheels, NLTK's two resources, the NegBench
# CSVs' first rows; carry .whl). It ends with one table (perf/gpu/table.py, where the goals live): each
# goal, the figure, pass or FAIL.
#   bash perf/gpu_check.sh              the GPU check: sizes that measure a GPU (16,384 images of mixed
#                                       sizes, batches of hundreds, warm-up excluded, rounds)
#   bash perf/gpu_check.sh --preflight  the preflight alone (seconds): what would stop the check, and why
#   bash perf/gpu_check.sh --cpu-smoke  the same steps, tiny, on the CPU (CI runs it: tests/test_gpu_check.py),
#                                       figures shown but not judged
# Every mode starts with the preflight (perf/gpu/preflight.py, at most 20 s: imports and versions, entry
# points, CUDA, one nvjpeg decode, NLTK, real captions) and stops at once, with the reason, where it fails;
# the GPU mode stops before anything else where the carried folder holds no wheels.
# Steps (each its own process and time limit; each writes <step>.json as soon as it has figures):
#   media     ViT-B-32 bf16 image and video encoding with decoding in the loop vs the pure forward
#             (perf/bench_decode_throughput.py via perf/gpu/media.py; nvjpeg fallbacks to Pillow counted)
#   text      text encoding on real captions, the runner's own path and the text tower alone (perf/bench_text_lengths.py)
#   peers     Retrieval-Neg vs CLIP_benchmark and MCQ vs the authors' loop, fp32, values compared; the
#             whole run's encode_s vs its total_s (perf/peer_clip_benchmark.py; peers skipped if not installed)
#   training  BNL step rate vs a bare loop (perf/bench_training.py; videos written with OpenCV, no PyAV)
#   harness   negharness.run of the shapes tasks on the device, peak memory (perf/gpu/harness.py)
#   sim       perf/gpu_sim.py on this machine's CPU: the simulated device's prediction for the same rows,
#             printed under the table beside what the device measured (issue 54 item 5: calibration)
# GPU_DECODE_SETUP=NAME names bench_decode_throughput.py's GPU-decode setup (default: found in its help).
# GPU_CHECK_WHEELS=DIR: the carried folder (default .whl; in --cpu-smoke only where set: the bare-machine
# rehearsal, perf/gpu/bare_machine.sh). Results go to $GPU_CHECK_RESULTS, else a temporary folder; where
# $OUT is set (the device machine's returned folder, at most 8 files) the table and one archive of every
# result go there, rewritten after each step: table.md and gpu_check.tar.gz. Exit code: the steps that did
# not finish (the preflight's fatal findings where it stopped the check).
set -uo pipefail
cd "$(dirname "$0")/.."
mode=gpu
case "${1:-}" in
  --cpu-smoke) mode=smoke ;;
  --preflight) mode=preflight ;;
  "") ;;
  *) echo "usage: bash perf/gpu_check.sh [--cpu-smoke | --preflight]" >&2; exit 2 ;;
esac
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
# every step is a fresh interpreter: compile each module once, into one cache all steps share
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-${TMPDIR:-/tmp}/negharness-gpu-check-pyc}"
RESULTS="${GPU_CHECK_RESULTS:-$(mktemp -d -t gpu-check-XXXXXX)}"
mkdir -p "$RESULTS" && rm -f "$RESULTS"/*.json "$RESULTS"/*.log "$RESULTS"/*.summary "$RESULTS"/steps.jsonl "$RESULTS"/table.md
PY="${PYTHON:-python3}"
start=$SECONDS
carried="${GPU_CHECK_WHEELS:-}"
if [ "$mode" != smoke ]; then carried="${carried:-.whl}"; fi
dev=cpu; if [ "$mode" != smoke ]; then dev=cuda; fi

publish() {  # the table and one archive of every result into $OUT (the device returns at most 8 files)
  "$PY" perf/gpu/table.py "$RESULTS" > "$RESULTS/table.md" 2>&1
  local rc=$?
  if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
    cp "$RESULTS/table.md" "$OUT/table.md.tmp" && mv "$OUT/table.md.tmp" "$OUT/table.md"
    # never the archive itself: $OUT may lie inside $RESULTS (CI's smoke test), and tar reading the file it is
    # writing fails ("file changed as we read it"), which once left only gpu_check.tar.gz.tmp in $OUT
    if tar -czf "$OUT/gpu_check.tar.gz.tmp" --exclude='gpu_check.tar.gz*' -C "$RESULTS" .; then
      mv "$OUT/gpu_check.tar.gz.tmp" "$OUT/gpu_check.tar.gz"
    else
      echo "publish: could not archive $RESULTS into $OUT" >&2; rc=1
    fi
  fi
  return $rc
}

if [ -n "$carried" ]; then
  if ! ls "$carried"/*.whl >/dev/null 2>&1; then
    echo "STOP: no wheels in $carried/ (run perf/gpu_wheels.sh here and name $carried in the device call's carry)" >&2
    printf '{"fatal": ["no wheels in %s/"]}\n' "$carried" > "$RESULTS/preflight.json"; publish; exit 2
  fi
  # the project's own wheel too: without its dist-info the built-in plugins' entry points are not found
  site="$(mktemp -d -t gpu-check-site-XXXXXX)"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$carried"/*.whl 2>&1 \
    | grep -v "^WARNING: Running pip" | tail -n 5
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  echo "installed $(ls "$carried"/*.whl | wc -l) wheels in $(( SECONDS - start )) s"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# the benchmarks' real files (NegBench CSVs: real captions) and the NLTK tagger (BNL's negated captions):
# ../shared beside a developer's checkout, else the carried folder's copy (perf/gpu_wheels.sh)
shared="${NEGHARNESS_SHARED:-$PWD/../shared}"
if [ ! -d "$shared" ] && [ -n "$carried" ] && [ -d "$carried/shared" ]; then shared="$carried/shared"; fi
if [ -d "$shared" ]; then export NEGHARNESS_SHARED="$(cd "$shared" && pwd)"; fi
if [ -z "${NLTK_DATA:-}" ] && [ -d "$shared/nltk_data" ]; then export NLTK_DATA="$(cd "$shared/nltk_data" && pwd)"; fi

if [ "$mode" = smoke ]; then
  device="cpu, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
else
  device="$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -n 1)"
fi
printf '{"mode": "%s", "device": "%s"}\n' "$mode" "${device//\"/}" > "$RESULTS/check.json"
echo "== $mode check on $device; results in $RESULTS"
limit=20; if [ "$mode" = smoke ]; then limit=120; fi  # the smoke shares CI's two loaded cores: importing torch alone took 7 s
timeout -k 2 "$limit" "$PY" perf/gpu/preflight.py --device "$dev" --json "$RESULTS/preflight.json" 2>&1 | tee "$RESULTS/preflight.log"
preflight=${PIPESTATUS[0]}
if [ "$preflight" != 0 ] || [ "$mode" = preflight ]; then
  [ "$preflight" = 124 ] && echo "STOP: the preflight took over $limit s"
  publish; cat "$RESULTS/table.md"; exit "$preflight"
fi
gpu_setup=(${GPU_DECODE_SETUP:+--gpu-setup "$GPU_DECODE_SETUP"})  # else the one bench_decode_throughput's help names

step() {  # step NAME SECONDS TITLE COMMAND...: run with a time limit; its log, a summary, exit code and wall
  local name=$1 limit=$2 title=$3; shift 3
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" --json "$RESULTS/$name.json" > "$RESULTS/$name.log" 2>&1
  local rc=$? wall=$(( SECONDS - t0 ))
  { echo; echo "== $name: $title (limit ${limit}s)"; grep -v "^WARNING: Running pip" "$RESULTS/$name.log" | tail -n 25
    echo "-- rc=$rc, ${wall} s"; } > "$RESULTS/$name.summary"
  printf '{"step": "%s", "rc": %d, "wall_s": %d, "limit_s": %d}\n' "$name" "$rc" "$wall" "$limit" >> "$RESULTS/steps.jsonl"
}

run_step() {  # on the GPU one after another (each measures the machine), the results published after each; the
  # smoke's steps at once (CI time: each is mostly a fresh interpreter importing torch and open_clip, one core's work)
  if [ "$mode" = smoke ]; then step "$@" & else step "$@"; cat "$RESULTS/$1.summary"; publish; fi
}

# GPU sizes: the limits sum to 550 s (+ ~15 s of wheel installs, <= 20 s of preflight), estimated from the
# 2026-11-28 H100 logs (../shared/gpu): ~18 s of imports per process, 19,886 img/s pure, ~1,000 img/s with
# CPU decoding in the loop (16,384 images: ~16 s a round); on the H200 (2026-11-30) the steps took media 110 s,
# text 21 s (37 s with runner_on), peers 67 s, harness 24 s, sim 15 s, and training 141 s for 3 rounds alone
# (it timed out at 70 s in the check): now 2 rounds in 120 s
if [ "$mode" = gpu ]; then
  run_step media 150 "16,384 COCO-like images of mixed sizes and video, ViT-B-32 bf16, in the loop vs pure forward" \
    "$PY" perf/gpu/media.py --device cuda --precision bf16 --model ViT-B-32 --images 16384 --videos 48 \
    --video-items 768 --batch 256 --rounds 2 ${gpu_setup[@]+"${gpu_setup[@]}"}
  run_step text 75 "text encoding, 16,384 real captions, ViT-B-32 bf16, the runner's path vs full context and the tower alone" \
    "$PY" perf/bench_text_lengths.py --device cuda --precision bf16 --texts 16384 --batch-size 1024 --rounds 3 \
    --paths full runner runner_on pure pure_cut
  run_step peers 110 "Retrieval-Neg and MCQ end to end vs the peers, fp32, 500 rows each" \
    "$PY" perf/peer_clip_benchmark.py --device cuda --rounds 1 --rows 500 --mcq-rows 500 --precisions fp32
  run_step training 120 "BNL training steps vs a bare loop, ViT-B-32 bf16" \
    "$PY" perf/bench_training.py --device cuda --precision bf16 --arch ViT-B-32 --videos 256 --steps 12 \
    --warm-steps 3 --batch 64 --workers 12 --rounds 2
  run_step harness 35 "negharness.run on the GPU, random ViT-B-32 bf16, batch 256" \
    "$PY" perf/gpu/harness.py --device cuda --precision bf16 --arch ViT-B-32 --batch-size 256
  run_step sim 60 "gpu_sim's prediction on this host's CPU (the device's work replaced by stand-ins), to set beside the rows above" \
    "$PY" perf/gpu_sim.py --quick
else
  run_step media 600 "images and video, micro model, decoding in the loop vs pure forward" \
    "$PY" perf/gpu/media.py --device cpu --model micro --images 16 --videos 2 --video-items 4 --batch 8 --rounds 1 \
    ${gpu_setup[@]+"${gpu_setup[@]}"}
  run_step text 600 "text encoding, 16 captions, tiny model" "$PY" perf/bench_text_lengths.py --tiny
  run_step peers 600 "Retrieval-Neg and MCQ end to end vs the peers (or a stand-in of CLIP_benchmark's output), tiny" \
    "$PY" perf/peer_clip_benchmark.py --tiny --precisions fp32 --peer-standin
  run_step training 600 "BNL training steps vs a bare loop, tiny" \
    "$PY" perf/bench_training.py --videos 4 --steps 1 --warm-steps 1 --batch 2 --size 32 --workers 0 --rounds 1
  run_step harness 600 "negharness.run, tiny model, 8 items per task" "$PY" perf/gpu/harness.py --arch tiny --limit 8
  run_step sim 600 "gpu_sim, 128 images and 512 texts" "$PY" perf/gpu_sim.py --images 128 --texts 512 --batch 64 \
    --text-batch 128 --repeat 1
fi

wait
if [ "$mode" = smoke ]; then for s in media text peers training harness sim; do cat "$RESULTS/$s.summary"; done; fi
echo; echo "== total $(( SECONDS - start )) s"
publish
failed=$?
cat "$RESULTS/table.md"
exit "$failed"
