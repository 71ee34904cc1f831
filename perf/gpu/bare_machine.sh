#!/usr/bin/env bash
# A rehearsal of the device call here, on a simulated bare machine (issue 54): a venv holding only the
# packages the device's image has (/work/.library/device/KINDS.md's list, those of them installed in the
# venv this runs from, linked, not copied: torch, torchvision, timm, transformers, OpenCV, Pillow and
# their own needs) and nothing from the network; perf/gpu_wheels.sh fills a carried folder for this
# machine's Python (GPU_WHEELS_PY), then perf/gpu_check.sh --cpu-smoke runs in that venv with the folder
# as its carried one and ../shared hidden (NEGHARNESS_SHARED points at nothing; NLTK_DATA unset): green
# only where everything it needs travels. Prints each phase's seconds: a perf script, not a CI test
# (the wheels' download needs the package index; the smoke itself takes minutes).
#   bash perf/gpu/bare_machine.sh [SOURCE_VENV]    (default /work/venv)
set -euo pipefail
cd "$(dirname "$0")/../.."
source_venv="${1:-/work/venv}"
work="$(mktemp -d -t gpu-bare-XXXXXX)"
t0=$SECONDS
pyver="$("$source_venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
GPU_WHEELS_DIR="$work/carried" GPU_WHEELS_PY="$pyver" PYTHON="$source_venv/bin/python" bash perf/gpu_wheels.sh
echo "== carried folder built in $(( SECONDS - t0 )) s"

t1=$SECONDS
"$source_venv/bin/python" -m venv --without-pip "$work/bare"
site="$("$work/bare/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$source_venv/bin/python" - "$site" <<'PY'
"""Link into the bare venv the device image's packages found in this venv (modules and dist-info)."""
import importlib.metadata as md
import os
import re
import sys
from pathlib import Path

DEVICE = """accelerate filelock fsspec huggingface-hub jinja2 markupsafe mpmath networkx numpy opencv-python-headless
packaging pillow pluggy psutil pyyaml regex requests safetensors sympy timm tokenizers torch torchvision tqdm
transformers typing-extensions urllib3 idna certifi charset-normalizer click joblib hf-xet pip setuptools rich
markdown-it-py mdurl pygments anyio h11 httpx httpcore shellingham typer""".split()
# (from /work/.library/device/KINDS.md "Python packages already there": the ones the check's imports reach)
target = Path(sys.argv[1])
linked = []
for name in DEVICE:
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        continue
    top = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
    for entry in top:
        src = Path(dist.locate_file(entry))
        if src.exists() and not (target / entry).exists() and not entry.startswith("__pycache__"):
            os.symlink(src, target / entry)
    linked.append(f"{name} {dist.version}")
print(f"bare venv: {len(linked)} packages linked: {', '.join(linked)}")
PY
for m in open_clip nltk lemminflect ftfy negharness; do  # none of these may be there before the wheels
  if "$work/bare/bin/python" -c "import importlib.util as u, sys; sys.exit(u.find_spec('$m') is None)" 2>/dev/null; then
    echo "the bare venv already has $m: not bare" >&2; exit 1
  fi
done
echo "== bare venv in $(( SECONDS - t1 )) s"

t2=$SECONDS
set +e
env -u NLTK_DATA -u PYTHONPATH NEGHARNESS_SHARED="$work/no-shared" GPU_CHECK_WHEELS="$work/carried" \
  GPU_CHECK_RESULTS="$work/results" PYTHON="$work/bare/bin/python" bash perf/gpu_check.sh --cpu-smoke
rc=$?
set -e
echo "== bare-machine --cpu-smoke: exit $rc in $(( SECONDS - t2 )) s (total $(( SECONDS - t0 )) s; carried folder $(du -sh "$work/carried" | cut -f1))"
exit $rc
