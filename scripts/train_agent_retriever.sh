#!/usr/bin/env bash
# Train the bundled MiniLM for agent traffic (issue 9) from every shared source, in one command:
#
#   bash scripts/train_agent_retriever.sh OUT [KEY=VALUE ...]     # -> OUT/final (about 34 minutes on a 2-core machine without AVX-512: docs/benchmarks.md)
#   bash scripts/train_agent_retriever.sh --multi-vector OUT [KEY=VALUE ...]   # the multi-vector (ColBERT-style) model
#   bash scripts/train_agent_retriever.sh --reranker OUT [KEY=VALUE ...]       # the reasoning-aware cross-encoder
#   TONGYI_LABELS=top3 bash scripts/train_agent_retriever.sh OUT                  # the old Tongyi labels (below)
#   CANDIDATES=bm25 bash scripts/train_agent_retriever.sh OUT                     # plain-BM25 hard negatives (below)
#   TEACHER=both TEACHER_MODEL=runs/agent/final TEACHER_RERANKER=runs/agent_reranker/final \
#     RECIPE=recipes/minilm_agent_distill.yaml bash scripts/train_agent_retriever.sh OUT    # distillation (3b below)
#   DATA_ONLY=1 bash scripts/train_agent_retriever.sh OUT                         # steps 1-3 only (no training)
#
# --multi-vector (or RECIPE=recipes/minilm_agent_multivector.yaml), --reranker (recipes/minilm_agent_reranker.yaml; its
# OUT/final reranks with hopscotch search --rerank-model) or RECIPE=any recipe trains another recipe on the same
# tuples; the default is recipes/minilm_agent.yaml.
#
# On a fresh clone beside ../shared (or with $HOPSCOTCH_DATA pointing at shared/data); runs setup.sh first.
# Only the train questions of experiments/agent_data/splits.py are used (its dev questions, which tune the defaults,
# and its test questions are never trained on); no BrowseComp-Plus or cmass data.
#
#  1. scripts/agent_data.py writes trace files of the train questions to OUT/data/:
#     HotpotQA IRCoT cot_steps (380 questions), MuSiQue hops as one step per hop (50 questions; query = the
#     sub-question with #k resolved, reasoning = the question and the earlier hops' sub-questions/answers,
#     gold = the hop's paragraph), Tongyi-DeepResearch search steps (8 train trajectories: trajectory 5
#     is left out, see TRAIN_EXCLUDED in experiments/agent_data/splits.py).
#  2. `hopscotch synth` (lexical oracle, 2 workers) labels each source, its candidates (the hard negatives) mined by
#     $CANDIDATES (default bm25-reasoning: the step's query expanded with its reasoning, the first stage an agent is
#     served; bm25: the query alone, as before; hybrid needs a dense index, not offered here). An OUT whose tuples
#     exist keeps them: give a new OUT to mine them another way; the world (seed 13, 3,000 docs,
#     300 questions) is generated and its first 220 questions labelled.
#     Labels: HotpotQA, MuSiQue and the world have gold documents (HotpotQA: the question's supporting
#     paragraphs, the oracle picks the step's; MuSiQue and the world: the step's own). The Tongyi steps
#     have no answers and no qrels: they get TRAJECTORY-USE labels (`hopscotch synth --mode trajectory-use`,
#     data_synth/trajectory_use.py: positives = the documents a call showed that the agent went on to use, by the
#     question-level dev sets' usage rule; negatives = shown and used by no call of the question, plus 3 BM25
#     hard negatives; calls with no used document give no tuple): OUT/data/tongyi_use_tuples.jsonl.
#     The old DISTILLATION labels are still written (OUT/data/tongyi_tuples.jsonl: the top 3 documents the
#     agent's own retriever returned for that call are the step's gold, the lexical oracle picks the positive;
#     no hard negative is a document any call of the question returned) and train with TONGYI_LABELS=top3.
#     Trajectory-use won on the dev questions (docs/benchmarks.md, "Trajectory-use labels against top-3 labels").
#  3. decontamination: every evaluation set of the ablation (experiments/agent_data/eval_sets.py: held-out
#     questions, tune and test) is written to OUT/data/eval/sets/, and `hopscotch audit contamination --clean`
#     writes OUT/data/clean/ = the tuple files without any tuple that asks, near-duplicates or quotes an
#     evaluation question or has an evaluation qrel document as a positive (removals listed in
#     OUT/data/clean/decontamination.json; the cleaned files audit to zero: OUT/data/contamination.json).
#     train.py gets the same sets as --eval-sets, so it refuses to start on contaminated data.
# 3b. TEACHER=hybrid|cross-encoder|both: each clean tuple file scored again by the teacher (`hopscotch synth --mode
#     teacher` with the file's own corpus: the reasoning-aware hybrid with TEACHER_MODEL's dense half, the
#     TEACHER_RERANKER cross-encoder, or the mean of their z-scores) into OUT/data/teacher_$TEACHER/, which the
#     recipe trains on (its loss.distill reads the teacher's scores; the Tongyi tuples stay trajectory-use ones).
#  4. train.py with recipes/minilm_agent.yaml: every query as its whole reasoning in AgentIR's template
#     (data.query_inputs: [reasoning]; until 2026-12-04 a uniform mixture of {query, current_reasoning,
#     reasoning, empty_reasoning}), query_max_len 256, 100 steps of 32 queries; OUT/final is the plain
#     fine-tune (train.wise_ft_alpha: 1.0; 0.7 mixed it with all-MiniLM-L6-v2 before) and records
#     the selection rule's search defaults (current_reasoning, query mix 0.6, the query alone above 200 words). KEY=VALUE arguments override the
#     recipe (e.g. train.max_steps=20; on a machine shared with another job train.threads=1 was twice as
#     fast: docs/training.md).
#
# Resumable: a killed run, rerun with the same OUT, keeps the trace files and finished tuple files,
# resumes a half-done synth from its parts and the training from its newest checkpoint (every 10 steps);
# a finished run is not redone.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RECIPE="${RECIPE:-recipes/minilm_agent.yaml}"
if [[ "${1:-}" == "--multi-vector" ]]; then
  RECIPE=recipes/minilm_agent_multivector.yaml
  shift
elif [[ "${1:-}" == "--reranker" ]]; then
  RECIPE=recipes/minilm_agent_reranker.yaml
  shift
fi
OUT="${1:?usage: bash scripts/train_agent_retriever.sh [--multi-vector | --reranker] OUT [KEY=VALUE ...]}"
shift
cd "$ROOT"
bash "$ROOT/scripts/setup.sh"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE="${WANDB_MODE:-disabled}" TOKENIZERS_PARALLELISM=false
export HOPSCOTCH_DATA="${HOPSCOTCH_DATA:-$ROOT/../shared/data}"
PY="$ROOT/.venv/bin/python"
HOP="$ROOT/.venv/bin/hopscotch"
if [[ -z "${TONGYI_LABELS:-}" ]]; then
  # trajectory-use tuples carry no teacher score: a distillation recipe (loss.distill) trains on the top-3 ones,
  # unless a TEACHER scores them
  TONGYI_LABELS=trajectory-use
  if [[ -z "${TEACHER:-}" && "$("$PY" -c 'import sys
from hopscotch.retriever.training.recipe import load_recipe
print(load_recipe(sys.argv[1], [a for a in sys.argv[2:] if "=" in a and not a.startswith("-")]).loss.distill)' \
        "$RECIPE" "$@" 2>/dev/null || echo none)" != none ]]; then
    TONGYI_LABELS=top3
    echo "train_agent_retriever: $RECIPE distils (loss.distill): Tongyi tuples with the oracle's scores (top3)" >&2
  fi
fi
case "$TONGYI_LABELS" in
  top3) TONGYI_FILE=tongyi_tuples.jsonl ;;
  trajectory-use) TONGYI_FILE=tongyi_use_tuples.jsonl ;;
  *) echo "train_agent_retriever: TONGYI_LABELS must be top3 or trajectory-use, got '$TONGYI_LABELS'" >&2; exit 2 ;;
esac
D="$HOPSCOTCH_DATA"
T="$OUT/data"
CANDIDATES="${CANDIDATES:-bm25-reasoning}"
mkdir -p "$T"
started=$SECONDS

# 1. trace files (written once: synth's resume checks its inputs' sizes and mtimes)
if [[ ! -f "$T/traces.done" ]]; then
  "$PY" scripts/agent_data.py "$T"
  touch "$T/traces.done"
fi
if [[ ! -f "$T/world.done" ]]; then
  rm -rf "$T/world"
  "$HOP" world --out "$T/world" --seed 13 --docs 3000 --questions 300
  touch "$T/world.done"
fi

# 2. DR-Synth tuples, one file per source (skipped when already written; a half-done one resumes)
synth() {
  local out="$1"
  shift
  [[ -f "$out" ]] || "$HOP" synth "$@" --out "$out" --oracle lexical --candidates "$CANDIDATES" --seed 13 \
    --workers 2 2>&1 \
    | grep -v '%|' || true
  [[ -f "$out" ]] || { echo "train_agent_retriever: synth failed for $out" >&2; exit 1; }
}
synth "$T/hotpot_tuples.jsonl" --qa "$D/hotpotqa_ircot" --traces "$T/hotpot_traces.jsonl" --trace-format ircot
synth "$T/musique_tuples.jsonl" --qa "$D/musique_hipporag" --traces "$T/musique_traces.jsonl" \
  --trace-format generic
synth "$T/tongyi_tuples.jsonl" --qa "$D/qampari_tongyi" --corpus "$D/qampari_tongyi/doc_snippets.jsonl" \
  --qrels "$T/tongyi_qrels.tsv" --traces "$T/tongyi_traces.jsonl" --trace-format generic --depth 100
synth "$T/world_tuples.jsonl" --qa "$T/world" --traces "$T/world/traces.jsonl" --trace-format world \
  --max-questions "$("$PY" -c 'from hopscotch_experiments.agent_data.splits import WORLD; print(WORLD["train"])')"
# trajectory-use labels of the same train trajectories (tongyi_train_questions.txt: scripts/agent_data.py)
if [[ ! -f "$T/tongyi_use_tuples.jsonl" ]]; then
  [[ -f "$T/tongyi_train_questions.txt" ]] || "$PY" scripts/agent_data.py "$T" > /dev/null
  "$HOP" synth --mode trajectory-use --traces "$D/qampari_tongyi/agent_search_steps.jsonl" \
    --runs "$D/qampari_tongyi/runs/infly.jsonl" --questions "$T/tongyi_train_questions.txt" \
    --out "$T/tongyi_use_tuples.jsonl" 2>&1 | grep -v '%|' || true
  [[ -f "$T/tongyi_use_tuples.jsonl" ]] || { echo "train_agent_retriever: trajectory-use synth failed" >&2; exit 1; }
fi
for f in hotpot musique tongyi tongyi_use world; do
  echo "tuples $f: $(wc -l < "$T/${f}_tuples.jsonl")"
done

# 3. decontamination against every dev set (each step written once; the report is the last file written)
if [[ ! -f "$T/eval/specs.txt" ]]; then
  mkdir -p "$T/eval"
  "$PY" scripts/agent_eval_sets.py --write "$T/eval" > "$T/eval/specs.txt.tmp"
  mv "$T/eval/specs.txt.tmp" "$T/eval/specs.txt"
fi
mapfile -t SPECS < "$T/eval/specs.txt"
if [[ ! -f "$T/contamination.json" || ! -f "$T/clean/tongyi_use_tuples.jsonl" ]]; then  # (older OUTs: no use file)
  EVALS=()
  for s in "${SPECS[@]}"; do EVALS+=(--eval "$s"); done
  "$HOP" audit contamination "${EVALS[@]}" --tuples "$T/hotpot_tuples.jsonl" --tuples "$T/musique_tuples.jsonl" \
    --tuples "$T/tongyi_tuples.jsonl" --tuples "$T/tongyi_use_tuples.jsonl" --tuples "$T/world_tuples.jsonl" \
    --clean "$T/clean" --report "$T/contamination.json.tmp" --overwrite
  mv "$T/contamination.json.tmp" "$T/contamination.json"
fi
echo "data ready after $((SECONDS - started)) s"
[[ "${DATA_ONLY:-0}" == 1 ]] && exit 0   # DATA_ONLY=1: the tuples and dev sets only (scripts/agent_trajectory_use.py)

# 4. training (resumes from OUT/checkpoint-*; nothing to do when OUT/final is complete)
if [[ -f "$OUT/train_summary.json" && -f "$OUT/final/hopscotch_config.json" ]]; then
  echo "already trained: $OUT/final"
  exit 0
fi
# --resume only when a run was started here (train.py refuses it on a folder holding nothing but data/)
RESUME=()
if compgen -G "$OUT/checkpoint-*" > /dev/null || [[ -f "$OUT/train_manifest.json" ]]; then
  RESUME=(--resume)
fi
EVAL_SETS=()
for s in "${SPECS[@]}"; do EVAL_SETS+=(--eval-sets "$s"); done
C="$T/clean"
if [[ -n "${TEACHER:-}" ]]; then  # 3b. the teacher's scores on every passage (each file written once)
  TEACH=(--teacher "$TEACHER")
  [[ "$TEACHER" == cross-encoder ]] || TEACH+=(--teacher-model "${TEACHER_MODEL:?TEACHER=$TEACHER needs TEACHER_MODEL}")
  [[ "$TEACHER" == hybrid ]] || TEACH+=(--teacher-reranker "${TEACHER_RERANKER:?TEACHER=$TEACHER needs TEACHER_RERANKER}")
  mkdir -p "$T/teacher_$TEACHER"
  for pair in "hotpot:$D/hotpotqa_ircot/corpus.jsonl" "musique:$D/musique_hipporag/corpus.jsonl" \
              "${TONGYI_FILE%_tuples.jsonl}:$D/qampari_tongyi/doc_snippets.jsonl" "world:$T/world/corpus.jsonl"; do
    name="${pair%%:*}"
    corpus=()
    [[ "$TEACHER" == cross-encoder ]] || corpus=(--corpus "${pair#*:}")
    [[ -f "$T/teacher_$TEACHER/${name}_tuples.jsonl" ]] || "$HOP" synth --mode teacher --tuples "$C/${name}_tuples.jsonl" \
      "${TEACH[@]}" "${corpus[@]}" --out "$T/teacher_$TEACHER/${name}_tuples.jsonl"
  done
  C="$T/teacher_$TEACHER"
fi
"$HOP" train --recipe "$RECIPE" --output "$OUT" "${RESUME[@]}" "${EVAL_SETS[@]}" \
  "data.train=[$C/hotpot_tuples.jsonl,$C/musique_tuples.jsonl,$C/$TONGYI_FILE,$C/world_tuples.jsonl]" "$@"
echo "trained in $((SECONDS - started)) s: $OUT/final"
