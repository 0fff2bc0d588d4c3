#!/usr/bin/env bash
# Issue 12 item 4: Hopscotch installs beside Hugging Face's `kernels` and PyPI's `retriever`.
#
#   scripts/check_coexistence.sh            # prints COEXISTENCE: PASS, or exits non-zero
#
# In a throwaway venv (a temp dir, removed at exit) it installs PyPI `kernels` and `retriever` (with their
# dependencies), then Hopscotch itself as a wheel built from this working tree (non-editable, installed
# last so that a Hopscotch file shipped under a clashing top-level name would overwrite theirs and fail
# the checks). From a directory outside the repository it checks that `kernels` and `retriever` are
# the third-party packages, that `hopscotch.kernels` runs the fused loss (Triton's CPU interpreter)
# and matches the reference, that transformers' hub-kernels integration imports against Hugging Face's
# `kernels`, and runs one real training step of the bundled MiniLM through the fused loss.
#
# To stay fast, the venv reuses the dependencies already installed in $HOPSCOTCH_DEPS_PYTHON's
# environment (default: the repository's .venv) through a .pth line that appends that site-packages to
# sys.path (path only: its .pth files, such as the editable Hopscotch finder, are not run). Packages
# installed in the throwaway venv come first on sys.path. pip runs with every already-installed
# distribution pinned to its installed version (torch included), so it only adds what is missing and
# never upgrades torch or anything else. Needs PyPI (the package registry) for `kernels`, `retriever`
# and their missing dependencies.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS_PY="${HOPSCOTCH_DEPS_PYTHON:-$REPO/.venv/bin/python}"
START=$SECONDS
WORK="$(mktemp -d "${TMPDIR:-/tmp}/hopscotch-coexist.XXXXXX")"
if [[ -z "${KEEP_COEXIST_DIR:-}" ]]; then trap 'rm -rf "$WORK"' EXIT; else echo "keeping $WORK"; fi
step() { printf '[%3ds] %s\n' "$((SECONDS - START))" "$*"; }
# pip's output goes to a log, shown when it fails.
quiet() { "$@" > "$WORK/pip.log" 2>&1 || { tail -n 60 "$WORK/pip.log"; echo "FAIL: $*"; exit 1; }; }
unset PYTHONPATH PYTHONHOME PIP_REQUIRE_VIRTUALENV

step "throwaway venv in $WORK/venv (deps from $DEPS_PY)"
DEPS_SITE="$("$DEPS_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$DEPS_PY" -m venv "$WORK/venv"
PY="$WORK/venv/bin/python"
VENV_SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
[[ "$VENV_SITE" != "$DEPS_SITE" ]] || { echo "FAIL: the throwaway venv shares $DEPS_SITE"; exit 1; }
echo "$DEPS_SITE" > "$VENV_SITE/zz_hopscotch_deps.pth"
PIP=("$PY" -m pip --disable-pip-version-check --no-input)

# Every distribution already installed (torch among them) pinned to its version: pip may add, never change.
"$DEPS_PY" -m pip list --format=freeze --exclude-editable --disable-pip-version-check 2>/dev/null \
  | grep -vi '^hopscotch==' > "$WORK/constraints.txt"
grep -qi '^torch==' "$WORK/constraints.txt" || { echo "FAIL: no torch in $DEPS_PY's environment"; exit 1; }

step "pip install kernels retriever (Hugging Face kernels, PyPI retriever; installed packages pinned)"
quiet "${PIP[@]}" install -c "$WORK/constraints.txt" kernels retriever

step "build Hopscotch wheel from the working tree ($REPO)"
mkdir -p "$WORK/src"
# A copy, so that the build writes its build/ and *.egg-info there, not into the repository.
tar -C "$REPO" --exclude=__pycache__ --exclude='*.pyc' -cf - pyproject.toml README.md hopscotch retriever kernels data_synth \
  | tar -C "$WORK/src" -xf -
# Build isolation, as a user's `pip install`: a fresh setuptools from pyproject's [build-system].
quiet "${PIP[@]}" wheel --no-deps -w "$WORK/dist" "$WORK/src"
WHEEL="$(ls "$WORK"/dist/hopscotch-*.whl)"
"$PY" - "$WHEEL" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
tops = sorted({n.split("/")[0] for n in names})
bad = [t for t in tops if t != "hopscotch" and not t.endswith(".dist-info")]
assert not bad, f"the wheel ships top-level names beside hopscotch/: {bad}"
for need in ("hopscotch/__init__.py", "hopscotch/kernels/__init__.py", "hopscotch/retriever/cli.py",
             "hopscotch/data_synth/__init__.py"):
    assert need in names, f"{need} missing from the wheel"
print(f"  wheel top level: {tops}")
EOF

step "pip install --no-deps $(basename "$WHEEL")"
quiet "${PIP[@]}" install --no-deps "$WHEEL"

step "checks, from $WORK/run (outside the repository)"
mkdir -p "$WORK/run" "$WORK/home"
cat > "$WORK/check.py" <<'EOF'
import importlib.metadata as md
import json, math, os, subprocess, sys, warnings
from pathlib import Path

repo, venv_site = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
assert not any(Path(p or ".").resolve() == repo for p in sys.path), f"the repository is on sys.path: {sys.path}"

def under(module, folder):
    return Path(module.__file__).resolve().is_relative_to(folder)

import kernels  # Hugging Face's
assert callable(getattr(kernels, "get_kernel", None)), f"`kernels` is not Hugging Face's: {kernels.__file__}"
# installed here, or already a dependency of the environment (transformers >= 5.25 requires it): never the repository's
assert not hasattr(kernels, "infonce_loss") and not under(kernels, repo / "kernels"), kernels.__file__
print(f"  kernels {md.version('kernels')} (Hugging Face): {kernels.__file__}")

import retriever  # PyPI's (the Data Retriever)
assert callable(getattr(retriever, "download", None)) and not hasattr(retriever, "cli"), retriever.__file__
assert under(retriever, venv_site), retriever.__file__
print(f"  retriever {md.version('retriever')} (PyPI): {retriever.__file__}")

import hopscotch.kernels
from hopscotch.kernels import infonce_loss, reference_infonce_loss
assert under(hopscotch.kernels, venv_site), f"not the installed wheel: {hopscotch.kernels.__file__}"
assert md.version("hopscotch") and Path(md.distribution("hopscotch").locate_file("")).resolve() == venv_site
print(f"  hopscotch {md.version('hopscotch')}: {hopscotch.kernels.__file__}")
from hopscotch import build_searcher, train  # the front door, from the wheel
assert under(sys.modules["hopscotch"], venv_site) and build_searcher.__module__.startswith("hopscotch.retriever")

import torch
g = torch.Generator().manual_seed(0)
q = torch.nn.functional.normalize(torch.randn(8, 32, generator=g), dim=-1).requires_grad_()
p = torch.nn.functional.normalize(torch.randn(16, 32, generator=g), dim=-1).requires_grad_()
labels = torch.arange(8) * 2
os.environ["TRITON_INTERPRET"] = "1"  # run the fused Triton kernels on CPU
fused = infonce_loss(q, p, labels, temperature=0.05)
(gq_f, gp_f) = torch.autograd.grad(fused, (q, p))
ref = reference_infonce_loss(q, p, labels, temperature=0.05)
(gq_r, gp_r) = torch.autograd.grad(ref, (q, p))
torch.testing.assert_close(fused, ref, atol=1e-4, rtol=1e-4)
torch.testing.assert_close(gq_f, gq_r, atol=1e-4, rtol=1e-4)
torch.testing.assert_close(gp_f, gp_r, atol=1e-4, rtol=1e-4)
del os.environ["TRITON_INTERPRET"]
print(f"  fused InfoNCE (Triton interpreter) = {fused.item():.5f} = reference {ref.item():.5f}, gradients match")

from transformers.utils import import_utils as tiu
available, version = tiu._is_package_available("kernels", return_version=True)
assert available and version == md.version("kernels"), (available, version)
import transformers.integrations.hub_kernels  # noqa: F401
window = f"{tiu.KERNELS_MIN_VERSION} <= v < {tiu.KERNELS_MAX_VERSION}"
print(f"  transformers' probe sees kernels {version} (accepts {window}: {tiu.is_kernels_available()}); "
      "transformers.integrations.hub_kernels imports")
# The branch transformers runs when the installed `kernels` is in its window: `from kernels import ...`.
# Forced on in a fresh process, so it runs whatever the installed version.
forced = ("import transformers.utils.import_utils as u; u.is_kernels_available = lambda *a, **k: True\n"
          "import transformers.integrations.hub_kernels as h, kernels\n"
          "assert h.get_kernel_hub is kernels.get_kernel and h.LayerRepository is kernels.LayerRepository\n"
          "print('ok')")
out = subprocess.run([sys.executable, "-c", forced], capture_output=True, text=True)
assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
print("  hub_kernels with is_kernels_available() forced True: `from kernels import ...` gets Hugging Face's")

from hopscotch.retriever.training.trainer import train
work = Path.cwd()
words = "red green blue cyan magenta yellow black white grey brown pink olive navy teal".split()
text = lambda i, k: " ".join(words[(i * k + j) % len(words)] for j in range(4 + (i * k) % 9))
with open(work / "tuples.jsonl", "w") as f:
    for i in range(8):
        f.write(json.dumps({"query_id": f"q{i}", "query": text(i, 1), "reasoning": text(i, 2),
                            "positive_passages": [{"docid": f"p{i}", "text": text(i, 3)}],
                            "negative_passages": [{"docid": f"n{i}", "text": text(i, 5)}]}) + "\n")
calls, losses = [], []
def counted(*args, **kwargs):
    calls.append(1)
    return infonce_loss(*args, **kwargs)
hopscotch.kernels.infonce_loss = counted  # the trainer's loss looks the fused loss up on hopscotch.kernels
os.environ["TRITON_INTERPRET"] = "1"
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    final = train(str(repo / "recipes" / "minilm_hotpot.yaml"), work / "run",
                  [f"data.train={work / 'tuples.jsonl'}", "train.max_steps=1", "train.batch_size=4",
                   "loss.backend=fused", "train.save_every=0", "train.threads=2", "model.query_max_len=32",
                   "model.passage_max_len=32"], on_step_end=lambda state, loss: losses.append(float(loss)),
                  show_progress=False)
fallbacks = [str(w.message) for w in caught if "no Triton" in str(w.message)]
assert calls and not fallbacks, (len(calls), fallbacks)
summary = json.loads((work / "run" / "train_summary.json").read_text())
assert summary["steps"] == 1 and len(losses) == 1 and math.isfinite(losses[0]), (summary, losses)
assert (Path(final) / "modules.json").is_file(), final
print(f"  one training step of the bundled MiniLM (recipes/minilm_hotpot.yaml, loss.backend=fused, "
      f"Triton interpreter; {len(calls)} fused loss call(s), loss {losses[0]:.4f}): {final}")
EOF
(
  cd "$WORK/run"
  HOME="$WORK/home" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false \
    "$PY" "$WORK/check.py" "$REPO" "$VENV_SITE"
)
"$WORK/venv/bin/hopscotch" --help > /dev/null || { echo "FAIL: the hopscotch command"; exit 1; }
echo "  the hopscotch command runs: $WORK/venv/bin/hopscotch"

step "done"
echo "COEXISTENCE: PASS"
