#!/usr/bin/env bash
# Sourced by the other scripts (or run: bash scripts/env.sh): create .venv (once), install the
# locked requirements (requirements.txt) and attnbook (editable) into it, activate it, and set the
# thread defaults that every script shares.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
TORCH_CPU_INDEX="${ATTNBOOK_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"

# One thread per process unless set otherwise: the numbers are reproduced bit for bit at a fixed
# thread count, and scripts/test.sh runs two processes side by side. torch sizes its intra-op pool
# from OMP_NUM_THREADS when it is imported (torch.get_num_threads() then reports it); numpy's and
# scipy's BLAS read OPENBLAS_NUM_THREADS, MKL builds MKL_NUM_THREADS.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
export MKL_NUM_THREADS="${MKL_NUM_THREADS:-$OMP_NUM_THREADS}"
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-$OMP_NUM_THREADS}"
export PYTHONHASHSEED=0
# No MPLBACKEND here: a Jupyter kernel that inherits MPLBACKEND=Agg shows no figures, and the
# book's figure labels then go undefined. Without a display matplotlib picks Agg by itself.

if [ ! -x .venv/bin/python ]; then
  echo "[attnbook] creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate

# Without an NVIDIA GPU, torch's CPU build goes in first (torch only, without its dependencies,
# which come from the lock): the lock's torch==X is then already met, and no CUDA libraries are
# installed. The CPU wheel index is tried first (a CPU wheel in pip's configured find-links is
# found as well); where neither has it, pip installs torch from PyPI as the lock does.
_attnbook_install_cpu_torch() {
  local want have
  want="$(sed -n -E 's/^torch==([^ ;]+).*/\1/p' requirements.txt)"
  [ -n "$want" ] || return 0
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then return 0; fi
  have="$(python -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null \
    || true)"
  [ "${have%%+*}" = "$want" ] && return 0
  echo "[attnbook] no NVIDIA GPU: installing torch $want, CPU build"
  if ! python -m pip install --quiet --no-deps --timeout 20 --retries 1 \
      --index-url "$TORCH_CPU_INDEX" "torch==$want" 2>/dev/null; then
    echo "[attnbook] no CPU build of torch $want found ($TORCH_CPU_INDEX): installing PyPI's"
    python -m pip install --quiet "torch==$want"
  fi
}

stamp=".venv/.requirements.sha"
want="$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[attnbook] installing the locked requirements into .venv"
  python -m pip install --quiet --upgrade pip
  _attnbook_install_cpu_torch
  python -m pip install --quiet -r requirements.txt
  python -m pip install --quiet --no-deps -e .
  python -m pip check
  echo "$want" > "$stamp"
fi
unset -f _attnbook_install_cpu_torch
