#!/usr/bin/env bash
# Regenerate requirements.txt, the exact lock of the build environment, from requirements.in:
#   bash scripts/lock.sh                        # keep the current pins where they still fit
#   bash scripts/lock.sh --upgrade              # move every package to its newest allowed release
#   bash scripts/lock.sh --upgrade-package NAME # move one package
# Extra arguments go to pip-compile (pip-tools), which this script installs on demand into
# _build/lock-tools (never into .venv). The lock is resolved for this machine's Python and
# platform (the committed one: Linux x86_64, Python 3.11) against torch's CPU build, so it lists
# no CUDA libraries; the torch line is written without the local "+cpu" tag, so that the CUDA
# build of the same version satisfies it on a machine with an NVIDIA GPU.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
TORCH_CPU_INDEX="${ATTNBOOK_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
tools="_build/lock-tools"
if [ ! -x "$tools/bin/pip-compile" ]; then
  echo "[attnbook] installing pip-tools into $tools"
  "$PYTHON" -m venv "$tools"
  "$tools/bin/python" -m pip install --quiet --upgrade pip
  "$tools/bin/python" -m pip install --quiet "pip-tools>=7.4,<8"
fi
# torch's CPU wheel index, where it can be reached; otherwise pip's own configuration decides
# (a CPU wheel in a configured find-links folder is preferred to PyPI's build of the same version).
index_args=()
if "$tools/bin/python" - "$TORCH_CPU_INDEX" <<'EOF'
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=10)
except Exception:
    sys.exit(1)
EOF
then
  index_args=(--extra-index-url "$TORCH_CPU_INDEX")
fi
mkdir -p _build
out="$(mktemp "$ROOT/_build/requirements.XXXXXX")"
trap 'rm -f "$out" "$out.tmp"' EXIT
# Start from the current lock, so that pip-compile keeps its pins unless told to upgrade.
if grep -q '^[A-Za-z0-9_.-]*==' requirements.txt 2>/dev/null; then cp requirements.txt "$out"; fi
start=$(date +%s)
CUSTOM_COMPILE_COMMAND="bash scripts/lock.sh" "$tools/bin/pip-compile" --quiet \
  --output-file "$out" --strip-extras --allow-unsafe --no-emit-index-url --no-emit-find-links \
  --newline LF ${index_args[@]+"${index_args[@]}"} "$@" requirements.in
# The lock names the version only: 2.13.0 is met by 2.13.0+cpu and by the CUDA build alike.
sed -E 's/^(torch==[^+ ]+)\+[A-Za-z0-9.]+/\1/' "$out" > "$out.tmp" && mv "$out.tmp" "$out"
if grep -qiE '^(nvidia-|triton==)' "$out"; then
  echo "[attnbook] the lock would install CUDA libraries: no CPU build of torch was found." >&2
  echo "[attnbook] make one reachable (ATTNBOOK_TORCH_CPU_INDEX=<index url>) and run again." >&2
  exit 1
fi
mv "$out" requirements.txt
trap - EXIT
echo "[attnbook] requirements.txt: $(grep -c '==' requirements.txt) packages pinned" \
  "in $(( $(date +%s) - start )) s; run a script (or bash scripts/env.sh) to install them"
