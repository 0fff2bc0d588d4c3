#!/usr/bin/env bash
# Create .venv and install Hopscotch into it, and beside it its experiments (experiments/: a distribution of their own).
# Idempotent: a second run only checks a stamp.
# On a CPU-only host torch is pinned to 2.13.0 (a local CPU wheel); a GPU host keeps its own torch.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
VENV="$ROOT/.venv"
STAMP="$VENV/.hopscotch-installed"
HASH="$(cat pyproject.toml experiments/pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$HASH" ]]; then
  exit 0
fi
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
if ! command -v nvidia-smi >/dev/null 2>&1; then
  "${PIP[@]}" "torch==2.13.0"
fi
"${PIP[@]}" -e ".[dev,serve]"
# the experiments (ablations, benchmarks, kernel harness, agent dev sets): a distribution of their own, outside the
# hopscotch wheel, imported by the drivers of scripts/ and by tests/experiments/
"${PIP[@]}" --no-deps -e ./experiments
# compile the disk BM25 backend's numba kernels now (cached beside them), so the first search is as fast as the next
PYTHONSAFEPATH=1 "$VENV/bin/python" -m hopscotch.retriever.index.bm25.warm
echo "$HASH" > "$STAMP"
echo "hopscotch installed in $VENV" >&2
