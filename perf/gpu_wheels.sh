#!/usr/bin/env bash
# Build, on a machine that reaches PyPI, every wheel perf/gpu_check.sh needs on the GPU machine (Python
# 3.12, x86-64, torch and torchvision installed, no network there) into .whl/ (ignored by git; name it in
# the device call's carry): the project's own wheel (its dist-info carries the entry points that register
# the built-in plugins) and the packages that machine lacked (issue 44: open_clip and the text tools, and
# CLIP_benchmark with what its COCO loader imports). No PyAV: the check writes its videos with OpenCV.
# The data the check reads travels in the same folder, copied here from ../shared (the device has no
# network and ../shared does not travel; nothing of it is committed): NLTK's two English resources that
# BNL's negated captions need (.whl/shared/nltk_data) and the first rows of the NegBench COCO CSVs (real
# captions for the text and peer steps; .whl/shared/data/...). perf/gpu_check.sh points NLTK_DATA and
# NEGHARNESS_SHARED there when ../shared is absent.
# It prints each wheel's requirements that no wheel here provides (assumed installed there) and the
# size of what travels (the checkout's files + .whl; the device call takes 64 MiB in all).
#   GPU_WHEELS_DIR  the folder to fill (default .whl; perf/gpu/bare_machine.sh fills another)
#   GPU_WHEELS_PY   the Python version the wheels are for (default 3.12, the device's)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
WHL="${GPU_WHEELS_DIR:-.whl}"
pyver="${GPU_WHEELS_PY:-3.12}"
shared="${NEGHARNESS_SHARED:-$PWD/../shared}"
rm -rf "$WHL" && mkdir -p "$WHL"
if [ "$WHL" = .whl ]; then
  grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> "$(git rev-parse --git-path info/exclude)"
fi
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any)
pkgs=(open_clip_torch==3.3.0 ftfy wcwidth nltk defusedxml click joblib lemminflect clip-benchmark==1.6.2 pycocotools webdataset
      braceexpand)
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp \
  --abi "cp${pyver/./}" --abi abi3 --abi none "${plat[@]}" -d "$WHL" "${pkgs[@]}"

# the data: NLTK's zips as published (NLTK reads them unopened) and each CSV's header plus first rows
# (text step: 16,384 captions = 3,277 rows of five; peers: 500 rows each)
csvs=data/negbench/negbench_eval_csvs/images
if [ -d "$shared/nltk_data" ] && [ -d "$shared/$csvs" ]; then
  for zip in tokenizers/punkt_tab.zip taggers/averaged_perceptron_tagger_eng.zip; do
    mkdir -p "$WHL/shared/nltk_data/$(dirname "$zip")" && cp "$shared/nltk_data/$zip" "$WHL/shared/nltk_data/$zip"
  done
  mkdir -p "$WHL/shared/$csvs"
  for rows in COCO_val_retrieval.csv:4000 COCO_val_negated_retrieval_llama3.1_rephrased_affneg_true.csv:1000 \
              COCO_val_mcq_llama3.1_rephrased.csv:1000; do
    "$PY" - "$shared/$csvs/${rows%%:*}" "$WHL/shared/$csvs/${rows%%:*}" "${rows##*:}" <<'PY'
import csv, sys
with open(sys.argv[1], newline="", encoding="utf-8") as f, open(sys.argv[2], "w", newline="", encoding="utf-8") as out:
    writer = csv.writer(out)
    for i, row in enumerate(csv.reader(f)):  # csv, not lines: a caption list may hold a newline
        if i > int(sys.argv[3]):
            break
        writer.writerow(row)
PY
  done
  echo "data: $(du -sh "$WHL/shared" | cut -f1) from $shared (NLTK's punkt_tab and tagger; the CSVs' first rows)"
else
  echo "no $shared/nltk_data or $shared/$csvs: the training step will stop on NLTK and the text step on captions" >&2
fi

# the project's own wheel, built from exactly the files that travel (tracked and untracked-not-ignored)
src="$(mktemp -d)"
git ls-files -z -co --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$src"
isolation=(); "$PY" -c "import setuptools, wheel" 2>/dev/null && isolation=(--no-build-isolation)
"$PY" -m pip wheel -q --no-deps "${isolation[@]}" "$src" -w "$WHL"
rm -rf "$src"

"$PY" - "$WHL" <<'PY'
import re, sys, zipfile
from pathlib import Path

wheels = sorted(Path(sys.argv[1]).glob("*.whl"))
names = {re.sub(r"[-_.]+", "-", w.name.split("-")[0]).lower() for w in wheels}
for w in wheels:
    with zipfile.ZipFile(w) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        reqs = [line[len("Requires-Dist: "):] for line in z.read(meta).decode().splitlines() if line.startswith("Requires-Dist: ")]
    needed = {re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", r).group(0)).lower() for r in reqs if "extra ==" not in r}
    print(f"{w.name}: {w.stat().st_size / 2**20:.1f} MiB; needs, not among these wheels: {', '.join(sorted(needed - names)) or '-'}")
PY
echo "carried folder $WHL: $(du -sh "$WHL" | cut -f1); checkout files that travel: $(git ls-files -z -co --exclude-standard | du -ch --files0-from=- | tail -n 1 | cut -f1)"
