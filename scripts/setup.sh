#!/usr/bin/env bash
# Create .venv and install Hopscotch into it. Idempotent: a second run only checks a stamp.
# On a CPU-only host torch is pinned to 2.13.0 (a local CPU wheel); a GPU host keeps its own torch.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
VENV="$ROOT/.venv"
STAMP="$VENV/.hopscotch-installed"
HASH="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$HASH" ]]; then
  exit 0
fi
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
if ! command -v nvidia-smi >/dev/null 2>&1; then
  "${PIP[@]}" "torch==2.13.0"
fi
"${PIP[@]}" -e ".[dev,serve]"
echo "$HASH" > "$STAMP"
echo "hopscotch installed in $VENV" >&2
