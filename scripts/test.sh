#!/usr/bin/env bash
# Fresh machine -> install, then run the test suite. Arguments go to pytest: without a path it runs every test
# (pyproject.toml's testpaths), with one it runs that file or test only:
#   bash scripts/test.sh tests/retriever/searchers/test_fusion.py -k rrf
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false
# never put the checkout's root on sys.path (pytest's own process and every subprocess a test starts): its kernels/
# folder would shadow Hugging Face's `kernels` package, which transformers (>= 5.25) imports; Hopscotch's own
# kernels are installed as hopscotch.kernels
export PYTHONSAFEPATH=1
exec "$ROOT/.venv/bin/python" -m pytest -q "$@"
