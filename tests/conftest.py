"""Shared fixtures: the shared data folder, small worlds, a tiny random BERT, and the CLI runner."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_MODE", "disabled")
# under pytest-xdist (scripts/test.sh runs the whole suite on 2 workers) each worker takes its share of the cores for
# torch's and FAISS's thread pools (and the subprocesses it starts inherit it): two workers of two threads each on two
# cores spend their time waiting for each other
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _share = (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, _share)))

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_data_path() -> Path | None:
    """``$HOPSCOTCH_DATA`` or ``../shared/data`` beside the repository, if it exists."""
    env = os.environ.get("HOPSCOTCH_DATA")
    for cand in ([Path(env)] if env else []) + [REPO_ROOT.parent / "shared" / "data"]:
        if cand.is_dir():
            return cand
    return None


def pytest_collection_modifyitems(config, items):
    """Files holding a test marked ``slow`` run first (a stable sort: the order within a file, and among the other
    files, is kept), so that when pytest-xdist hands whole files to its workers (scripts/test.sh) the long ones start
    early and the workers end together instead of one finishing a long file alone."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared real data (HotpotQA/IRCoT, MuSiQue, QAMPARI/Tongyi); skips when absent."""
    path = shared_data_path()
    if path is None:
        pytest.skip("shared data not found: set HOPSCOTCH_DATA or place it at ../shared/data")
    return path


@pytest.fixture(scope="session")
def small_world(tmp_path_factory) -> Path:
    """A 300-document, 40-question embedded world written as a BEIR folder."""
    from hopscotch.data_synth.world import build_world, write_world

    out = tmp_path_factory.mktemp("world")
    write_world(build_world(seed=7, docs=300, questions=40), out)
    return out


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> Path:
    """A tiny random BERT (2 layers, hidden 32) saved as a sentence-transformers folder.

    Its tokenizer is the bundled MiniLM's WordPiece vocabulary, so texts tokenize realistically.
    """
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import AutoTokenizer, BertConfig, BertModel

    from hopscotch.retriever.model.loading import bundled_minilm_path

    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("tiny_bert")
    tok = AutoTokenizer.from_pretrained(bundled_minilm_path())
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512)
    hf_dir = out / "hf"
    BertModel(config).save_pretrained(hf_dir)
    tok.save_pretrained(hf_dir)
    word = models.Transformer(str(hf_dir), max_seq_length=128)
    dim = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    pool = models.Pooling(dim(), pooling_mode="mean")
    st_dir = out / "st"
    SentenceTransformer(modules=[word, pool, models.Normalize()], device="cpu").save(str(st_dir))
    return st_dir


@pytest.fixture(scope="session")
def tiny_cross_encoder_dir(tmp_path_factory):
    """A saved tiny random cross-encoder (2 BERT layers, hidden 32, the bundled MiniLM's vocabulary; query side 24
    tokens, pair 64), reading reasoning-aware queries in the ``reasoning`` variant. Its weights are drawn wider than
    BERT's initialisation (0.2) so that its logits tell documents apart (a near-constant score ranks nothing)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from hopscotch.retriever.model.cross_encoder import build_cross_encoder_model
    from hopscotch.retriever.model.loading import bundled_minilm_path

    root = tmp_path_factory.mktemp("tiny_cross_encoder")
    tok = AutoTokenizer.from_pretrained(bundled_minilm_path())
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, num_labels=1, initializer_range=0.2)
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(root / "hf")
    tok.save_pretrained(root / "hf")
    build_cross_encoder_model(root / "hf", query_max_len=24, passage_max_len=40, seed=0, device="cpu").save(root / "ce")
    return root / "ce"


@pytest.fixture(scope="session")
def _small_world_dense_index(small_world, tiny_bert_dir, tmp_path_factory) -> Path:
    from hopscotch.retriever.index.encode import EncodeOptions, encode_corpus

    out = tmp_path_factory.mktemp("dense_index") / "idx"
    encode_corpus(small_world / "corpus.jsonl", tiny_bert_dir, out,
                  EncodeOptions(shard_size=64, batch_size=32, max_length=64, show_progress=False))
    return out


@pytest.fixture(scope="module")
def small_world_index(_small_world_dense_index, tmp_path_factory) -> Path:
    """A sharded dense index (shards of 64) of ``small_world`` by the tiny BERT, encoded once per session;
    each test module gets its own copy, so it may build and remove FAISS indexes in it."""
    import shutil

    out = tmp_path_factory.mktemp("dense_copy") / "idx"
    shutil.copytree(_small_world_dense_index, out)
    return out


@pytest.fixture
def write_training_tuples():
    """``write(path, n=48, second_positive=False)``: a Tevatron JSONL of ``n`` colour-word tuples
    (4 negatives each; some without reasoning); returns the path."""

    def write(path: Path, n: int = 48, second_positive: bool = False) -> Path:
        import json

        words = "red green blue cyan magenta yellow black white grey brown pink olive navy teal".split()
        rows = []
        for i in range(n):
            text = lambda k: " ".join(words[(i * k + j) % len(words)] for j in range(4 + (i * k) % 9))  # noqa: E731
            positives = [{"docid": f"p{i}", "text": text(3)}]
            if second_positive:
                positives.append({"docid": f"p{i}b", "text": text(4)})
            rows.append({"query_id": f"q{i}", "query": text(1), "reasoning": text(2) if i % 3 else None,
                         "positive_passages": positives,
                         "negative_passages": [{"docid": f"n{i}_{k}", "text": text(5 + k)} for k in range(4)]})
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    return write


@pytest.fixture
def cli(capsys):
    """Run ``hopscotch`` in-process: returns (exit code, stdout, stderr)."""
    from hopscotch.retriever.cli import main

    def run(*argv):
        code = main([str(a) for a in argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
