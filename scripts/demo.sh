#!/usr/bin/env bash
# Fresh machine -> the main job on the embedded default: install, then `hopscotch demo`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE="${WANDB_MODE:-disabled}"
exec "$ROOT/.venv/bin/hopscotch" demo --out "${HOPSCOTCH_DEMO_OUT:-$ROOT/demo_out}" "$@"
