#!/usr/bin/env bash
# Fetch, on a machine that reaches PyPI, the wheels perf/gpu_check.sh needs on the GPU machine (Python 3.12,
# x86-64, no network there) into .whl/ (ignored by git; name it in the device call's carry).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any)
for pkg in open_clip_torch ftfy wcwidth nltk lemminflect av; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" -d .whl "$pkg"
done
ls -la .whl
