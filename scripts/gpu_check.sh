#!/usr/bin/env bash
# One prepared GPU check of the fused InfoNCE kernel (kernels/), under 5 minutes on one GPU:
#   1. correctness: hopscotch.kernels.infonce_loss vs hopscotch.kernels.reference_infonce_loss on fresh random data
#      (fp32 / bf16 / fp16, exclusion none / ids / dense, both backward variants) -> CHECK: PASS|FAIL
#   2. timings (median of 25 after warm-up, CUDA events) and peak extra memory of forward + backward,
#      bf16, B in {1024, 4096, 16384}, N = 8 B, d in {384, 1024}, against torch matmul + cross_entropy.
# Prints two Markdown tables (paste the second into docs/benchmarks.md). Exit 0 only when the check
# passed. Extra arguments go to scripts/bench_kernel.py (e.g. --skip-bench, --sizes 1024 --dims 384).
#
# Installs nothing: uses the first of PYTHON, .venv/bin/python, python3, python that imports torch
# with CUDA, and puts the repository first on PYTHONPATH so that this `kernels`
# package wins over any other installed one. Only if that still fails does it try `pip install -e .`
# without dependencies.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# The first python that imports torch with CUDA (PYTHON, .venv/bin/python, python3, python).
pick_python() {
  local candidate
  for candidate in ${PYTHON:-} .venv/bin/python python3 python; do
    command -v "$candidate" >/dev/null 2>&1 || continue
    if "$candidate" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}
if ! PY="$(pick_python)"; then
  echo "gpu_check: no python here imports torch with CUDA available (tried PYTHON, .venv/bin/python, python3, python)" >&2
  exit 2
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}"
unset TRITON_INTERPRET

if ! "$PY" -c "import triton" >/dev/null 2>&1; then
  echo "gpu_check: $PY has torch but not triton" >&2
  exit 2
fi
probe='import os, sys, hopscotch.kernels.infonce
sys.exit(0 if os.path.dirname(hopscotch.kernels.infonce.__file__).startswith(sys.argv[1]) else 1)'
if ! "$PY" -c "$probe" "$ROOT"; then
  echo "gpu_check: $PY does not import kernels from $ROOT; trying pip install -e . --no-deps" >&2
  "$PY" -m pip install --quiet --no-deps --no-build-isolation -e . >&2
  "$PY" -c "$probe" "$ROOT"
fi
echo "gpu_check: using $PY" >&2

command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
# 290 s hard stop; bench_kernel.py itself stops starting new sizes after --budget-s (240 s).
timeout --signal=INT --kill-after=10 290 "$PY" scripts/bench_kernel.py --device cuda "$@"
