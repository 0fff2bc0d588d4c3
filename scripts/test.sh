#!/usr/bin/env bash
# Fresh machine -> install, then run the test suite (extra arguments go to pytest).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false
# no PYTHONSAFEPATH: the suite runs as a user types commands in the clone root (kernels/__init__.py hands the
# top-level name `kernels` to Hugging Face's package; Hopscotch's own kernels are hopscotch.kernels)
exec "$ROOT/.venv/bin/python" -m pytest tests -q "$@"
