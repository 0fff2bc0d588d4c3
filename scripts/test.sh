#!/usr/bin/env bash
# Fresh machine -> install, then run the test suite. Arguments go to pytest: without a path it runs every test
# (pyproject.toml's testpaths) on two workers (pytest-xdist, one test file per worker at a time, so a file's
# fixtures are built once); with a path it runs that file or test only, in this process:
#   bash scripts/test.sh tests/retriever/searchers/test_fusion.py -k rrf
# HOPSCOTCH_TEST_WORKERS=N sets the workers of a whole run (0: none); -n N or -p no:xdist are obeyed as given.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false
# no PYTHONSAFEPATH: the suite runs as a user types commands in the clone root (kernels/__init__.py hands the
# top-level name `kernels` to Hugging Face's package; Hopscotch's own kernels are hopscotch.kernels)
WORKERS=(-n "${HOPSCOTCH_TEST_WORKERS:-2}" --dist loadfile)
for arg in "$@"; do
  case "$arg" in
    -n|-n[0-9]*|--numprocesses*|no:xdist) WORKERS=() ;;
    -*) ;;
    *) if [[ -e "${arg%%::*}" ]]; then WORKERS=(); fi ;;
  esac
done
if [[ "${HOPSCOTCH_TEST_WORKERS:-2}" == 0 ]]; then WORKERS=(); fi
exec "$ROOT/.venv/bin/python" -m pytest -q "${WORKERS[@]}" "$@"
