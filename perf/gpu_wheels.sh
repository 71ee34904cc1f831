#!/usr/bin/env bash
# Build, on a machine that reaches PyPI, every wheel perf/gpu_check.sh needs on the GPU machine (Python
# 3.12, x86-64, torch and torchvision installed, no network there) into .whl/ (ignored by git; name it in
# the device call's carry): the project's own wheel (its dist-info carries the entry points that register
# the built-in plugins) and the packages that machine lacked (issue 44: open_clip and the text tools, and
# CLIP_benchmark with what its COCO loader imports). No PyAV: the check writes its videos with OpenCV.
# It prints each wheel's requirements that no wheel here provides (assumed installed there) and the
# size of what travels (the checkout's files + .whl; the device call takes 64 MiB in all).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
rm -rf .whl && mkdir -p .whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> "$(git rev-parse --git-path info/exclude)"
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any)
pkgs=(open_clip_torch==3.3.0 ftfy wcwidth nltk defusedxml click joblib lemminflect clip-benchmark==1.6.2 pycocotools webdataset
      braceexpand)
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --abi abi3 \
  --abi none "${plat[@]}" -d .whl "${pkgs[@]}"

# the project's own wheel, built from exactly the files that travel (tracked and untracked-not-ignored)
src="$(mktemp -d)"
git ls-files -z -co --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$src"
isolation=(); "$PY" -c "import setuptools, wheel" 2>/dev/null && isolation=(--no-build-isolation)
"$PY" -m pip wheel -q --no-deps "${isolation[@]}" "$src" -w .whl
rm -rf "$src"

"$PY" - <<'PY'
import re, zipfile
from pathlib import Path

wheels = sorted(Path(".whl").glob("*.whl"))
names = {re.sub(r"[-_.]+", "-", w.name.split("-")[0]).lower() for w in wheels}
for w in wheels:
    with zipfile.ZipFile(w) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        reqs = [line[len("Requires-Dist: "):] for line in z.read(meta).decode().splitlines() if line.startswith("Requires-Dist: ")]
    needed = {re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", r).group(0)).lower() for r in reqs if "extra ==" not in r}
    print(f"{w.name}: {w.stat().st_size / 2**20:.1f} MiB; needs, not among these wheels: {', '.join(sorted(needed - names)) or '-'}")
PY
echo "wheels: $(du -sh .whl | cut -f1); checkout files that travel: $(git ls-files -z -co --exclude-standard | du -ch --files0-from=- | tail -n 1 | cut -f1)"
