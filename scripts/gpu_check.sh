#!/usr/bin/env bash
# One check of every GPU path of Hopscotch on one GPU (H100 / H200), under 8 minutes of measurement:
#
#   bash scripts/gpu_check.sh OUT.md              # measure; table to stdout and OUT.md (default runs/gpu_check.md)
#   bash scripts/gpu_check.sh --dry-run OUT.md    # measure nothing: every section "skipped: no CUDA"; exit 0
#   bash scripts/gpu_check.sh --cpu-smoke OUT.md  # every section on CPU with tiny sizes (catches typos); no install
#
# Sections (scripts/gpu_check.py; each with a hard time budget, a failing one does not stop the others):
# 1 fused InfoNCE kernel vs reference + bench_kernel.py's time/memory table, and the fused MaxSim (late
# interaction) loss: accuracy vs float64, time / peak memory vs the PyTorch reference at B=32, Lq 32-256,
# N=64, Lp=180, d=128 (scripts/gpu_check_kernel.py, part 4), 2 encode_corpus vs
# SentenceTransformer.encode, 3 faiss-gpu vs faiss-cpu IVF-PQ on 1M vectors, 4 MiniLM recipe 30 steps
# fused vs reference loss, 5 one LoRA + gradient-checkpointing step of a random Qwen3-Embedding-4B.
# The last line printed is `GPU CHECK: PASS` (exit 0) or `GPU CHECK: FAIL` (exit 1); with --dry-run
# `GPU CHECK: SKIPPED (dry run)` (exit 0). Without --dry-run / --cpu-smoke and no CUDA: exit 2.
#
# Installs (only where nvidia-smi exists, never with --dry-run / --cpu-smoke / --no-install): runs
# scripts/setup.sh (keeps the host's torch), then the `gpu` extra (faiss-gpu-cu12) into the python that
# has CUDA; a failed faiss-gpu install is tolerated (section 3 then says "skipped"). Install time is
# not part of the 8 minutes. Extra arguments go to scripts/gpu_check.py (e.g. --sections kernel qwen).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

MODE=measure
INSTALL=1
PASS_ON=()
for arg in "$@"; do
  case "$arg" in
    --dry-run) MODE=dry ;;
    --cpu-smoke) MODE=smoke ;;
    --no-install) INSTALL=0; continue ;;
  esac
  PASS_ON+=("$arg")
done

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false WANDB_MODE=disabled
unset TRITON_INTERPRET

# The first of PYTHON, .venv/bin/python, python3, python whose torch sees CUDA ($1 = cuda), or that imports torch.
pick_python() {
  local candidate want="$1" probe="import torch, sys; sys.exit(0)"
  [[ "$want" == cuda ]] && probe="import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
  for candidate in ${PYTHON:-} .venv/bin/python python3 python; do
    command -v "$candidate" >/dev/null 2>&1 || continue
    if "$candidate" -c "$probe" >/dev/null 2>&1; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}

if [[ "$MODE" != measure ]]; then  # nothing to install or measure on a GPU
  PY="$(pick_python any || command -v python3 || echo python3)"
  exec "$PY" scripts/gpu_check.py ${PASS_ON[@]+"${PASS_ON[@]}"}
fi

if [[ "$INSTALL" == 1 ]] && command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  bash scripts/setup.sh || echo "gpu_check: scripts/setup.sh failed; going on with what is installed" >&2
fi
if ! PY="$(pick_python cuda)"; then
  echo "gpu_check: no python here imports torch with CUDA available (tried PYTHON, .venv/bin/python, python3," \
       "python); run with --dry-run or --cpu-smoke on a machine without a GPU" >&2
  echo "GPU CHECK: FAIL (no CUDA)"
  exit 2
fi
echo "gpu_check: using $PY" >&2

# hopscotch and its experiments (experiments/: the GPU check's shared pieces and the kernel harness), both from $ROOT
probe='import os, sys, hopscotch.kernels.infonce, hopscotch_experiments.benchmarks.gpu_check as g
ours = [hopscotch.kernels.infonce.__file__, g.__file__]
sys.exit(0 if all(os.path.realpath(f).startswith(os.path.realpath(sys.argv[1])) for f in ours) else 1)'
if ! "$PY" -c "$probe" "$ROOT" >/dev/null 2>&1; then
  echo "gpu_check: $PY does not import hopscotch and hopscotch_experiments from $ROOT;" \
       "pip install --no-deps -e . -e ./experiments" >&2
  "$PY" -m pip install --quiet --no-deps --no-build-isolation -e . -e ./experiments >&2 || true
fi

if [[ "$INSTALL" == 1 ]]; then
  PIP=("$PY" -m pip install --quiet --disable-pip-version-check --retries 1 --timeout 20)
  has_gpu_faiss='import faiss, sys; sys.exit(0 if hasattr(faiss, "StandardGpuResources") else 1)'
  if ! "$PY" -c "$has_gpu_faiss" >/dev/null 2>&1; then
    timeout 300 "${PIP[@]}" -e ".[gpu]" >&2 || timeout 300 "${PIP[@]}" faiss-gpu-cu12 >&2 \
      || echo "gpu_check: faiss-gpu-cu12 did not install; the faiss section will be skipped" >&2
    # faiss-cpu and faiss-gpu-cu12 both install the `faiss` package: with both, the CPU one may win
    if ! "$PY" -c "$has_gpu_faiss" >/dev/null 2>&1 && "$PY" -m pip show faiss-gpu-cu12 >/dev/null 2>&1; then
      "$PY" -m pip uninstall --quiet -y faiss-cpu >&2 || true
      timeout 300 "${PIP[@]}" --force-reinstall --no-deps faiss-gpu-cu12 >&2 || true
    fi
  fi
fi

# Hard stop: 8 minutes (gpu_check.py's section budgets and grace add up to 7.7 minutes). On SIGTERM gpu_check.py
# kills the running section's process group and exits 124.
timeout --signal=TERM --kill-after=10 480 "$PY" scripts/gpu_check.py ${PASS_ON[@]+"${PASS_ON[@]}"}
rc=$?
if [[ $rc == 137 || $rc == 124 ]]; then
  echo "gpu_check: stopped after 8 minutes" >&2
  echo "GPU CHECK: FAIL"
  exit 1
fi
exit $rc
