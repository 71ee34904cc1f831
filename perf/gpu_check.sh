#!/usr/bin/env bash
# The GPU readiness check (issue 44): one call on a bare GPU machine, under 6 minutes on one H100, run
# from the repository root with the wheels perf/gpu_wheels.sh put in .whl/ (carry .whl). It ends with
# one table (perf/gpu/table.py, where the goals live): each goal, the figure, pass or FAIL.
#   bash perf/gpu_check.sh              the GPU check: sizes that measure a GPU (thousands of images,
#                                       batches of hundreds, warm-up excluded, three rounds)
#   bash perf/gpu_check.sh --cpu-smoke  the same steps, tiny, on the CPU (CI runs it: tests/test_gpu_check.py),
#                                       figures shown but not judged
# Steps (each its own process and time limit; each writes <step>.json to the results folder):
#   media     ViT-B-32 bf16 image and video encoding with decoding in the loop vs the pure forward
#             (perf/bench_decode_throughput.py via perf/gpu/media.py; its GPU-decode setup where it has one)
#   text      text encoding on real captions (perf/bench_text_lengths.py)
#   peers     Retrieval-Neg vs CLIP_benchmark and MCQ vs the authors' loop, fp32, values compared; the
#             whole run's wall vs its encode_s (perf/peer_clip_benchmark.py; peers skipped if not installed)
#   training  BNL step rate vs a bare loop (perf/bench_training.py; videos written with OpenCV, no PyAV)
#   harness   negharness.run of the shapes tasks on the device, peak memory (perf/gpu/harness.py)
# GPU_DECODE_SETUP=NAME names bench_decode_throughput.py's GPU-decode setup (default: found in its help).
# Results go to $GPU_CHECK_RESULTS, else $OUT/gpu_check (the device machine's returned folder), else a
# temporary folder; each step's full output is <step>.log there. Exit code: the steps that did not finish.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=gpu
case "${1:-}" in
  --cpu-smoke) mode=smoke ;;
  "") ;;
  *) echo "usage: bash perf/gpu_check.sh [--cpu-smoke]" >&2; exit 2 ;;
esac
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
# every step is a fresh interpreter: compile each module once, into one cache all steps share
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-${TMPDIR:-/tmp}/negharness-gpu-check-pyc}"
RESULTS="${GPU_CHECK_RESULTS:-${OUT:+$OUT/gpu_check}}"
RESULTS="${RESULTS:-$(mktemp -d -t gpu-check-XXXXXX)}"
mkdir -p "$RESULTS" && rm -f "$RESULTS"/*.json "$RESULTS"/*.log "$RESULTS"/steps.jsonl
PY="${PYTHON:-python3}"
start=$SECONDS

if [ "$mode" = gpu ] && ls .whl/*.whl >/dev/null 2>&1; then
  # the project's own wheel too: without its dist-info the built-in plugins' entry points are not found
  site="$(mktemp -d -t gpu-check-site-XXXXXX)"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .whl/*.whl 2>&1 \
    | grep -v "^WARNING: Running pip" | tail -n 5
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  echo "installed $(ls .whl/*.whl | wc -l) wheels in $(( SECONDS - start )) s"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# the benchmarks' real files (NegBench CSVs: real captions) and the NLTK tagger (BNL's negated captions)
shared="${NEGHARNESS_SHARED:-$PWD/../shared}"
if [ -d "$shared" ]; then export NEGHARNESS_SHARED="$(cd "$shared" && pwd)"; fi
if [ -z "${NLTK_DATA:-}" ] && [ -d "$shared/nltk_data" ]; then export NLTK_DATA="$(cd "$shared/nltk_data" && pwd)"; fi

if [ "$mode" = gpu ]; then
  device="$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -n 1)"
else
  device="cpu, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
fi
printf '{"mode": "%s", "device": "%s"}\n' "$mode" "${device//\"/}" > "$RESULTS/check.json"
echo "== $mode check on $device; results in $RESULTS"
"$PY" -c "import importlib.util as u; print('modules missing:', [m for m in ('torch', 'open_clip', 'nltk', 'lemminflect',
  'ftfy', 'cv2', 'clip_benchmark', 'pycocotools') if u.find_spec(m) is None] or 'none')"
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

run_step() {  # on the GPU one after another (each measures the machine); the smoke's steps at once (CI time:
  # each is mostly a fresh interpreter importing torch and open_clip, one core's work)
  if [ "$mode" = smoke ]; then step "$@" & else step "$@"; cat "$RESULTS/$1.summary"; fi
}

# GPU sizes: the limits sum to 345 s (+ ~15 s of wheel installs); expected ~290 s on one H100, estimated from
# the 2026-11-28 logs (../shared/gpu): ~15 s of imports per process, 19,886 img/s pure, ~1,000 img/s in the loop
if [ "$mode" = gpu ]; then
  run_step media 80 "images and video, ViT-B-32 bf16, decoding in the loop vs pure forward" \
    "$PY" perf/gpu/media.py --device cuda --precision bf16 --model ViT-B-32 --images 2048 --videos 48 \
    --video-items 768 --batch 256 --rounds 3 ${gpu_setup[@]+"${gpu_setup[@]}"}
  run_step text 50 "text encoding, 16,384 real captions, ViT-B-32 bf16" \
    "$PY" perf/bench_text_lengths.py --device cuda --precision bf16 --texts 16384 --batch-size 1024 --rounds 3 \
    --paths full planned
  run_step peers 110 "Retrieval-Neg and MCQ end to end vs the peers, fp32, 500 rows each" \
    "$PY" perf/peer_clip_benchmark.py --device cuda --rounds 1 --rows 500 --mcq-rows 500 --precisions fp32
  run_step training 70 "BNL training steps vs a bare loop, ViT-B-32 bf16" \
    "$PY" perf/bench_training.py --device cuda --precision bf16 --arch ViT-B-32 --videos 256 --steps 12 \
    --warm-steps 3 --batch 64 --workers 12 --rounds 3
  run_step harness 35 "negharness.run on the GPU, random ViT-B-32 bf16, batch 256" \
    "$PY" perf/gpu/harness.py --device cuda --precision bf16 --arch ViT-B-32 --batch-size 256
else
  run_step media 600 "images and video, micro model, decoding in the loop vs pure forward" \
    "$PY" perf/gpu/media.py --device cpu --model micro --images 16 --videos 2 --video-items 4 --batch 8 --rounds 1 \
    ${gpu_setup[@]+"${gpu_setup[@]}"}
  run_step text 600 "text encoding, 16 captions, tiny model" "$PY" perf/bench_text_lengths.py --tiny
  run_step peers 600 "Retrieval-Neg and MCQ end to end vs the peers, tiny" \
    "$PY" perf/peer_clip_benchmark.py --tiny --precisions fp32
  run_step training 600 "BNL training steps vs a bare loop, tiny" \
    "$PY" perf/bench_training.py --videos 4 --steps 1 --warm-steps 1 --batch 2 --size 32 --workers 0 --rounds 1
  run_step harness 600 "negharness.run, tiny model, 8 items per task" "$PY" perf/gpu/harness.py --arch tiny --limit 8
fi

wait
if [ "$mode" = smoke ]; then for s in media text peers training harness; do cat "$RESULTS/$s.summary"; done; fi
echo; echo "== total $(( SECONDS - start )) s"
"$PY" perf/gpu/table.py "$RESULTS" | tee "$RESULTS/table.md"
exit "${PIPESTATUS[0]}"
