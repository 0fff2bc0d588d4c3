"""Training a multi-vector (ColBERT-style) model with Hopscotch's trainer (``model.kind: multi_vector``) on a tiny
random BERT: a short run trains and saves a folder ``MultiVectorEncoder`` loads with the trained token vectors
(WiSE-FT mixed, dev set scored by MaxSim); the loss is the kernels' MaxSim InfoNCE reference with duplicate
positives masked; GradCache and chunked encoding give the full batch's loss and gradients; a killed run resumes
exactly; two processes (torchrun) equal one on the concatenated batch; recipe errors name the key.

This file is also the runner of its subprocesses: ``python test_multi_vector_training.py --run RECIPE_JSON OUTPUT
[--kill-at N] [--resume]`` and ``torchrun --nproc_per_node 2 test_multi_vector_training.py --worker OUT MODEL``.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()


def mv_recipe(model_dir, tuples, **train) -> dict:
    return {"model": {"name": str(model_dir), "kind": "multi_vector", "dim": 16, "query_max_len": 32,
                      "passage_max_len": 32, "query_augmentation": 12},
            "loss": {"temperature": 1.0},
            "data": {"train": str(tuples), "group_size": 3},
            "train": {"batch_size": 4, "lr": 1e-3, "threads": 1, "save_every": 0, **train}}


def build(model_dir, learn_temperature=False):
    from hopscotch.retriever.training.recipe import load_recipe
    from hopscotch.retriever.training.setup import build_model

    torch.manual_seed(0)
    return build_model(load_recipe(mv_recipe(model_dir, "unused.jsonl"), [f"loss.learn_temperature={learn_temperature}"]))


def make_groups(n: int = 8):
    """``n`` query groups (a positive and two negatives, punctuation in some); group 4 carries a copy of query
    0's positive among its negatives (a duplicate the loss must mask)."""
    from hopscotch.retriever.io.tuples import Passage
    from hopscotch.retriever.training.batches import Group

    def text(i, k):
        return " ".join(WORDS[(i * 3 + j * k) % len(WORDS)] for j in range(3 + (i * k) % 11)) + ("." if k % 2 else "")

    groups = []
    for i in range(n):
        passages = [Passage(f"p{i}", "", text(i, 5))] + [Passage(f"n{i}_{k}", "", text(i, 7 + k)) for k in range(2)]
        groups.append(Group(i, text(i, 1), text(i, 2) if i % 2 else None, passages, frozenset({f"p{i}"})))
    if n > 4:
        groups[4].passages[2] = groups[0].passages[0]
    return groups


def grads(model):
    out = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out


def test_a_short_run_trains_and_saves_a_multi_vector_encoder(tiny_bert_dir, tmp_path, write_training_tuples,
                                                             monkeypatch):
    from safetensors.torch import load_file
    from sentence_transformers import MultiVectorEncoder

    from hopscotch.retriever.model.multi_vector_trainable import TrainableMultiVector
    from hopscotch.retriever.training import setup
    from hopscotch.retriever.training.trainer import train

    tuples = write_training_tuples(tmp_path / "t.jsonl")
    rows = [json.loads(line) for line in tuples.read_text().splitlines()]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"_id": p["docid"], "text": p["text"]}) + "\n"
                                                   for r in rows for p in r["positive_passages"] + r["negative_passages"]))
    (tmp_path / "q.jsonl").write_text("".join(json.dumps({"_id": r["query_id"], "text": r["query"]}) + "\n" for r in rows))
    (tmp_path / "qrels.tsv").write_text("".join(f"{r['query_id']}\tp{r['query_id'][1:]}\t1\n" for r in rows[:12]))
    built, losses, trained = [], [], {}
    monkeypatch.setattr(setup, "build_model", lambda r, real=setup.build_model: built.append(real(r)) or built[-1])

    def at_step_end(state, loss):
        losses.append(loss)
        trained.update({k: v.detach().clone() for k, v in built[0].state_dict().items()})

    recipe = mv_recipe(tiny_bert_dir, tuples, max_steps=3, wise_ft_alpha=0.5)
    recipe["data"]["query_inputs"] = ["query", "reasoning", "empty_reasoning"]
    recipe["eval"] = {"queries": str(tmp_path / "q.jsonl"), "corpus": str(tmp_path / "corpus.jsonl"),
                      "qrels": str(tmp_path / "qrels.tsv"), "metric": "recall@100"}
    final = train(recipe, tmp_path / "run", on_step_end=at_step_end, show_progress=False)

    assert len(losses) == 3 and all(math.isfinite(v) and v > 0 for v in losses)
    model, start = built  # the model trained, then the starting model WiSE-FT mixes it with
    assert isinstance(model, TrainableMultiVector) and model.dim == 16
    before = start.state_dict()
    moved = [k for k, v in trained.items() if v.is_floating_point() and not torch.equal(v, before[k])]
    assert "st.1.linear.weight" in moved and any("encoder.layer.0" in k for k in moved)  # weights changed
    saved = load_file(str(Path(final) / "model.safetensors"))
    for key in ("embeddings.word_embeddings.weight", "encoder.layer.1.output.dense.weight"):
        mixed = 0.5 * trained[f"st.0.model.{key}"] + 0.5 * before[f"st.0.model.{key}"]
        assert torch.allclose(saved[key], mixed, atol=1e-6), key

    summary = json.loads((tmp_path / "run" / "train_summary.json").read_text())
    assert summary["recipe"]["model"]["kind"] == "multi_vector" and summary["wise_ft_alpha"] == 0.5
    assert 0.0 < summary["best_metric"] <= 1.0 and (tmp_path / "run" / "best" / "modules.json").is_file()

    # the folder is a MultiVectorEncoder whose token vectors are the trained (and mixed) model's
    st = MultiVectorEncoder(final, device="cpu")
    model.eval()
    groups = make_groups(3)
    queries = model.multi_vector.format_queries([g.query for g in groups], [g.reasoning for g in groups])
    docs = [(p.title, p.text) for g in groups for p in g.passages]
    with torch.no_grad():
        q, p, _ = model(queries=model.tokenize_queries([g.query for g in groups], [g.reasoning for g in groups]),
                        passages=model.tokenize_passages(docs))
    for ours, theirs in [(q, st.encode_query(queries)),
                         (p, st.encode_document(model.multi_vector.format_documents(docs)))]:
        assert len(theirs) == ours.shape[0]
        for vectors, mask, expected in zip(ours.embeddings, ours.mask, theirs):
            assert torch.allclose(vectors[mask], expected, atol=1e-5)
    assert q.mask.sum(1).min() >= 12  # the [MASK] augmentation scores
    assert json.loads((Path(final) / "hopscotch_config.json").read_text())["kind"] == "multi_vector"


def test_the_loss_is_the_kernels_maxsim_reference_with_duplicates_masked(tiny_bert_dir):
    from hopscotch.kernels import reference_maxsim_infonce_loss
    from hopscotch.retriever.training.batches import Collator
    from hopscotch.retriever.training.loss import InfoNCELoss

    model = build(tiny_bert_dir).eval()
    batch = Collator(model)(make_groups())
    with torch.no_grad():
        q, p, t = model(queries=batch.queries, passages=batch.passages)
    assert q.embeddings.shape[:2] == q.mask.shape and p.embeddings.shape[0] == 24 and p.mask.dtype == torch.bool
    assert not p.mask[batch.passages["input_ids"] == model.tokenizer.convert_tokens_to_ids(".")].any()  # skiplist
    by_hand = reference_maxsim_infonce_loss(q.embeddings, p.embeddings, batch.labels, float(t),
                                            (batch.q_pos_ids, batch.p_ids), q_mask=q.mask, p_mask=p.mask)
    out = InfoNCELoss("reference")(q, p, batch.labels, t, batch.q_pos_ids, batch.p_ids)
    assert out.value == pytest.approx(float(by_hand), abs=1e-6) and float(out.loss) == pytest.approx(out.value, abs=1e-6)
    plain = InfoNCELoss("reference", exclude_positive_duplicates=False)(q, p, batch.labels, t, batch.q_pos_ids,
                                                                       batch.p_ids)
    assert out.value < plain.value  # the planted copy of query 0's positive left its denominator
    learnt = InfoNCELoss("reference")(q, p, batch.labels, t.clone().requires_grad_(), batch.q_pos_ids, batch.p_ids)
    assert learnt.value == pytest.approx(out.value, abs=1e-5)


def backward(loss):
    loss.backward()


@pytest.mark.parametrize("learn_temperature", [False, True])
def test_gradcache_and_chunked_encoding_equal_the_full_batch(tiny_bert_dir, learn_temperature):
    from hopscotch.retriever.training.batches import Collator
    from hopscotch.retriever.training.loss import InfoNCELoss
    from hopscotch.retriever.training.step import GradCache, cached_step, full_step

    model = build(tiny_bert_dir, learn_temperature).eval()  # no dropout: every path sees the same network
    batch = Collator(model)(make_groups())
    full_loss = full_step(model, batch, InfoNCELoss("reference"), backward)
    full = grads(model)
    chunked_loss = full_step(model, batch, InfoNCELoss("reference"), backward, encode_chunk_size=3)
    chunked = grads(model)
    cache = GradCache(3, "right", learn_temperature)  # 3 query and 8 passage mini-batches
    cached_loss = cached_step(model, batch, InfoNCELoss("reference"), backward, model.temperature, cache)
    cached = grads(model)
    assert set(cached) == set(full) == set(chunked) and len(full) > 10
    assert ("log_temperature" in full) == learn_temperature and "st.1.linear.weight" in full
    for loss, got in [(chunked_loss, chunked), (cached_loss, cached)]:
        assert loss == pytest.approx(full_loss, abs=1e-5)
        for name in full:
            assert torch.allclose(got[name], full[name], atol=1e-5, rtol=1e-4), name


def test_gradcache_replays_dropout(tiny_bert_dir, monkeypatch):
    from hopscotch.retriever.model.multi_vector_trainable import TrainableMultiVector
    from hopscotch.retriever.training.batches import Collator
    from hopscotch.retriever.training.loss import InfoNCELoss
    from hopscotch.retriever.training.step import GradCache, cached_step

    model = build(tiny_bert_dir).train()
    batch = Collator(model)(make_groups())
    seen = {"cache": {}, "replay": {}}
    encode = TrainableMultiVector.encode

    def recording(self, features, kind="query", chunk_size=None):
        out = encode(self, features, kind, chunk_size)
        key = (kind, features["input_ids"].numpy().tobytes())
        seen["replay" if torch.is_grad_enabled() else "cache"][key] = out.embeddings.detach().clone()
        return out

    monkeypatch.setattr(TrainableMultiVector, "encode", recording)
    cached_step(model, batch, InfoNCELoss("reference"), backward, model.temperature, GradCache(3))
    assert seen["cache"].keys() == seen["replay"].keys() and len(seen["cache"]) == 3 + 8
    for key, first in seen["cache"].items():
        assert torch.equal(first, seen["replay"][key])


def run_training(recipe_file: Path, out: Path, *flags: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, __file__, "--run", str(recipe_file), str(out), *flags], check=False,
                          env=env, capture_output=True, text=True, timeout=1800)


@pytest.mark.slow
def test_killed_and_resumed_multi_vector_run_matches_uninterrupted_run(tiny_bert_dir, tmp_path,
                                                                      write_training_tuples):
    from safetensors.torch import load_file

    recipe = mv_recipe(tiny_bert_dir, write_training_tuples(tmp_path / "t.jsonl", second_positive=True),
                       max_steps=5, save_every=2, warmup_steps=1, scheduler="cosine", seed=3, gradcache_chunk_size=3)
    recipe["loss"]["learn_temperature"] = True
    recipe_file = tmp_path / "recipe.json"
    recipe_file.write_text(json.dumps(recipe))
    straight = run_training(recipe_file, tmp_path / "straight")
    assert straight.returncode == 0, straight.stderr[-2000:]
    killed = run_training(recipe_file, tmp_path / "killed", "--kill-at", "3")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert not (tmp_path / "killed" / "final").exists()
    resumed = run_training(recipe_file, tmp_path / "killed", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming from" in resumed.stdout + resumed.stderr

    a_final, b_final = tmp_path / "straight" / "final", tmp_path / "killed" / "final"
    files = sorted(p.relative_to(a_final) for p in a_final.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b_final) for p in b_final.rglob("*") if p.is_file())
    assert [f for f in files if (a_final / f).read_bytes() != (b_final / f).read_bytes()] == []
    a, base = load_file(str(a_final / "model.safetensors")), load_file(str(tiny_bert_dir / "model.safetensors"))
    assert any(not torch.allclose(a[k], base[k]) for k in a if k in base and a[k].shape == base[k].shape)
    summary = json.loads((tmp_path / "killed" / "train_summary.json").read_text())
    assert summary["steps"] == 5 and summary["recipe"]["model"]["kind"] == "multi_vector"


@pytest.mark.parametrize("override, message", [("model.kind=colbert", "recipe key model.kind: expected one of"),
                                               ("model.dim=0", "recipe key model.dim must be >= 1, got 0")])
def test_recipe_errors_name_the_key(cli, tmp_path, override, message):
    code, _, err = cli("train", "--recipe", ROOT / "recipes" / "minilm_agent_multivector.yaml", "--output",
                       tmp_path / "o", override)
    assert code == 2 and err.strip().count("\n") == 0 and message in err
    assert not (tmp_path / "o").exists()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def step_results(model, batch, backward, no_sync=None):
    """Loss and gradients of a plain step, then of a GradCache step (mini-batches of 2)."""
    import contextlib

    from hopscotch.retriever.training.loss import InfoNCELoss
    from hopscotch.retriever.training.step import GradCache, cached_step, full_step

    unwrapped = getattr(model, "module", model)
    out = {}
    for mode in ("full", "cached"):
        if mode == "full":
            loss = full_step(model, batch, InfoNCELoss("reference"), backward)
        else:
            cache = GradCache(2, "right", learn_temperature=True, no_sync=no_sync or contextlib.nullcontext)
            loss = cached_step(model, batch, InfoNCELoss("reference"), backward, unwrapped.temperature, cache)
        out[mode] = {"loss": loss, "grads": {n: p.grad.clone() for n, p in unwrapped.named_parameters()
                                               if p.requires_grad}}
        unwrapped.zero_grad(set_to_none=True)
    return out


def worker(out_file: str, model_dir: str) -> None:
    from accelerate import Accelerator

    from hopscotch.retriever.training.batches import Collator, local_share

    torch.set_num_threads(1)
    accelerator = Accelerator(cpu=True)
    assert accelerator.num_processes == 2, accelerator.state
    model = build(model_dir, learn_temperature=True).eval()
    batch = Collator(model)(local_share(make_groups(), accelerator.process_index, 2))
    ddp = accelerator.prepare(model)
    assert isinstance(ddp, torch.nn.parallel.DistributedDataParallel)
    result = step_results(ddp, batch, accelerator.backward, lambda: accelerator.no_sync(ddp))
    if accelerator.is_main_process:
        torch.save(result, out_file)
    accelerator.wait_for_everyone()


@pytest.mark.slow
def test_two_processes_equal_one_process_on_the_concatenated_batch(tiny_bert_dir, tmp_path):
    from hopscotch.retriever.training.batches import Collator

    out_file = tmp_path / "rank0.pt"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), __file__, "--worker", str(out_file), str(tiny_bert_dir)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    distributed = torch.load(out_file)
    model = build(tiny_bert_dir, learn_temperature=True).eval()
    single = step_results(model, Collator(model)(make_groups()), backward)
    for mode in ("full", "cached"):
        assert distributed[mode]["loss"] == pytest.approx(single[mode]["loss"], abs=1e-5)
        got, expected = distributed[mode]["grads"], single[mode]["grads"]
        assert got.keys() == expected.keys() and "log_temperature" in got
        for name, g in expected.items():
            assert torch.allclose(got[name], g, atol=1e-5, rtol=1e-4), (mode, name, (got[name] - g).abs().max())


if __name__ == "__main__" and "--worker" in sys.argv:
    worker(*sys.argv[sys.argv.index("--worker") + 1:])
elif __name__ == "__main__" and "--run" in sys.argv:
    from hopscotch.retriever.training.trainer import train

    recipe_path, output = sys.argv[sys.argv.index("--run") + 1:sys.argv.index("--run") + 3]
    kill_at = int(sys.argv[sys.argv.index("--kill-at") + 1]) if "--kill-at" in sys.argv else None

    def maybe_kill(state, loss):
        if kill_at is not None and state.step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    train(json.loads(Path(recipe_path).read_text()), output, resume="--resume" in sys.argv, on_step_end=maybe_kill,
          show_progress=False)
