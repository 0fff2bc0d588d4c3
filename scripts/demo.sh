#!/usr/bin/env bash
# Fresh machine -> the main job on the embedded default: install, then `hopscotch demo`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE="${WANDB_MODE:-disabled}"
export PYTHONSAFEPATH=1   # the checkout root never on sys.path: its kernels/ would shadow Hugging Face's kernels
exec "$ROOT/.venv/bin/hopscotch" demo --out "${HOPSCOTCH_DEMO_OUT:-$ROOT/demo_out}" "$@"
