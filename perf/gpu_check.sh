#!/usr/bin/env bash
# One short GPU readiness check (goal: under 8 minutes on one H100), run from the repository root on a
# machine with a CUDA GPU. It prints figures only; nothing here is a test. What it measures (issue 38):
#   1. ViT-B-32 bf16 image encoding with JPEG decoding in the loop (images/s) and its share of the pure
#      forward pass (goal >= 5,000 images/s and >= 0.9 of the pure rate);
#   2. text encoding on real caption lengths (texts/s);
#   3. NegBench Retrieval-Neg and MCQ end to end against CLIP_benchmark and the authors' MCQ scoring on the
#      same GPU (CLIP_benchmark only where installed);
#   4. a BNL training step rate against a bare PyTorch loop on the same batches (goal >= 0.9);
#   5. the harness itself on the GPU: `negharness.run` of the world's tasks with a random ViT-B-32 in bf16,
#      its records' metrics and the peak GPU memory (torch.cuda.max_memory_allocated).
# Packages the GPU machine lacks (open_clip_torch, nltk, lemminflect, av, ftfy, wcwidth) travel as wheels in
# .whl/ (perf/gpu_wheels.sh fetches them on a machine with PyPI); they are installed to /tmp/site first.
# Each step has its own time limit, so one slow step cannot eat the others' time.
set -uo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
PY=python3

step() {  # step SECONDS TITLE COMMAND...: run with a time limit, print its output and wall time
  local limit=$1 title=$2; shift 2
  echo; echo "== $title (limit ${limit}s)"
  local t0=$(date +%s)
  timeout "$limit" "$@" 2>&1 | grep -v "^WARNING: Running pip" | tail -n 30
  echo "-- rc=${PIPESTATUS[0]}, $(( $(date +%s) - t0 )) s"
}

echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 | tail -n 2
$PY - <<'PY'
import torch, importlib.util as u
print("torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
print("missing:", [m for m in ("open_clip", "nltk", "lemminflect", "av", "ftfy", "clip_benchmark") if u.find_spec(m) is None] or "none")
PY

step 120 "1. image encoding with JPEG decoding, ViT-B-32 bf16 (in the loop vs pure forward)" \
  $PY perf/bench_decode_throughput.py --device cuda --precision bf16 --models ViT-B-32 --kinds image \
  --setups threads:auto processes:8 --rounds 2
step 90 "2. text encoding on real caption lengths, ViT-B-32 bf16" \
  $PY perf/bench_text_lengths.py --device cuda --precision bf16 --texts 4096 --batch-size 256 --rounds 2
step 180 "3. NegBench Retrieval-Neg and MCQ end to end against the peers, same GPU" \
  $PY perf/peer_clip_benchmark.py --device cuda --rounds 1 --rows 1000 --mcq-rows 1000
step 120 "4. BNL training steps: negharness's loop vs a bare loop on the same batches" \
  $PY perf/bench_training.py --device cuda --precision bf16 --arch ViT-B-32 --videos 256 --steps 24 --batch 32 --workers 12
step 90 "5. negharness.run on the GPU (random ViT-B-32, bf16, batch 256): metrics and peak memory" $PY - <<'PY'
import tempfile, time
from pathlib import Path
import torch
import negharness
from negharness.testing import random_open_clip
tmp = Path(tempfile.mkdtemp())
opts = random_open_clip(tmp, "ViT-B-32")
t0 = time.perf_counter()
out = negharness.run("clip", ["shapes_t2i_original", "shapes_t2v_original"], arch=opts[3], checkpoint=opts[5],
                     device="cuda", precision="bf16", batch_size=256, output_dir=str(tmp / "res"), cache_dir=str(tmp / "c"))
print(f"{time.perf_counter() - t0:.1f} s; peak GPU memory {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")
for o in out:
    print(o.task, o.record["device"], {k: round(v, 3) for k, v in o.record["metrics"].items()})
PY
echo; echo "== done"
