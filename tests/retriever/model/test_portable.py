"""Portable model folders: sentence-transformers reproduces Hopscotch's query vectors (long reasoning included),
the folder carries a model card, the Qwen recipe joins its instruction exactly as Tevatron/AgentIR do, and Hub
ids resolve from the local Hugging Face cache offline (and go online only when the hub is not turned off)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.config import EncoderConfig, model_settings
from hopscotch.retriever.model.query_template import format_queries, format_query, parse_query

ROOT = Path(__file__).resolve().parents[3]
QUERY = "who directed Gummo"
REASONING = " ".join(f"Step {i}: the film was shot in Nashville, and its director grew up in Xenia, Ohio."
                     for i in range(40))
# for reasoning_focus: the sentence about the query is old, buried under newer unrelated ones
FOCUS_REASONING = ("We need the director of the 1997 film Gummo. Gummo was directed by Harmony Korine, a note says. "
                   + " ".join(f"Note {i}: Xenia, Ohio has {i + 3} parks and a river." for i in range(30))
                   + "\nThen search again.")
PASSAGES = [("Gummo", "Gummo is a 1997 American experimental drama film written and directed by Harmony Korine. "
             * 8), ("", "Xenia is a city in Greene County, Ohio.")]
# AgentIR (texttron/AgentIR @ 24d9078): training/train.sh PROMPT, the --task-prefix of its evaluation scripts,
# and searcher/prompts.py format_reasoning_query; Tevatron's dataset.py formats `query_prefix + query`.
AGENTIR_PREFIX = ("Instruct: Given a user's reasoning followed by a web search query, retrieve relevant passages that "
                  "answer the query while incorporating the user's reasoning\nQuery:")


def agentir_query(query: str, thinking: str | None) -> str:
    return AGENTIR_PREFIX + f"Reasoning: {thinking if thinking else 'Empty'}\n\nQuery: {query}"


def cosine(a, b) -> float:
    return float(torch.nn.functional.cosine_similarity(torch.as_tensor(a), torch.as_tensor(b), dim=-1).min())


@pytest.fixture(scope="module", params=[("reasoning", ""), ("reasoning_tail:40", "Instruct: find the film\nQuery:"),
                                        ("reasoning_focus:40", "")],
                ids=["reasoning", "tail_with_instruction", "focus"])
def saved_minilm(request, tmp_path_factory):
    """The bundled MiniLM saved through Hopscotch's saving code with a 64-token query budget."""
    from hopscotch.retriever.model.dual_encoder import DualEncoder

    variant, instruction = request.param
    config = EncoderConfig(query_max_len=64, passage_max_len=96, query_input=variant, instruction=instruction)
    model = DualEncoder.from_pretrained("minilm", config).eval()
    model.training_info = {"data": ["runs/agent/data/hotpot_tuples.jsonl"], "recipe": "minilm_agent"}
    path = Path(model.save(tmp_path_factory.mktemp("saved") / "final"))
    return model, path


def test_sentence_transformers_with_the_folders_tokenizer_matches_a_query_longer_than_the_limit(saved_minilm):
    from sentence_transformers import SentenceTransformer

    from hopscotch.retriever.model.dense_encoder import DenseEncoder

    model, path = saved_minilm
    c = model.config
    assert len(model.tokenizer(REASONING)["input_ids"]) > 5 * c.query_max_len
    with torch.no_grad():
        ours = model.encode(model.tokenize_queries([QUERY], [REASONING]), "query")
    dense = DenseEncoder(path, max_length=c.query_max_len, device="cpu")
    searched = dense.encode_queries([QUERY], [REASONING], reasoning_aware=True, instruction=c.instruction,
                                    query_input=c.query_input)
    assert cosine(ours, searched) >= 0.9999  # the trainer's and the searcher's encodings agree
    st = SentenceTransformer(str(path), device="cpu", trust_remote_code=True)
    assert type(st.tokenizer).__name__ == "HopscotchQueryTokenizer"
    text = f"Reasoning: {REASONING}\n\nQuery: {QUERY}"  # AgentIR's text, no cut, no instruction
    assert cosine(ours, st.encode([text])) >= 0.9999
    assert cosine(ours, st.encode_query([text])) >= 0.9999  # the 'query' prompt adds the instruction first
    assert cosine(ours, st.encode([c.instruction + text])) >= 0.9999
    with torch.no_grad():
        passages = model.encode(model.tokenize_passages(PASSAGES), "passage")
    docs = [t + " " + x if t else x for t, x in PASSAGES]
    assert cosine(passages, st.encode(docs)) >= 0.9999  # passages (one over the limit) pass unchanged
    assert st.tokenizer.hopscotch_query_text("Gummo is a film.") == "Gummo is a film."


def test_the_folders_query_tokenizer_writes_the_text_hopscotch_encodes(saved_minilm):
    from transformers import AutoTokenizer

    model, path = saved_minilm
    tokenizer = AutoTokenizer.from_pretrained(str(path), trust_remote_code=True)
    assert type(tokenizer).__name__ == "HopscotchQueryTokenizer"
    for reasoning in (REASONING, FOCUS_REASONING):
        (ours,) = model.format_queries([QUERY], [reasoning])
        assert tokenizer.hopscotch_query_text(f"Reasoning: {reasoning}\n\nQuery: {QUERY}") == ours
    if model.config.query_input.startswith("reasoning_focus:"):  # the buried sentence, not the newer notes
        assert ours == ("Reasoning: We need the director of the 1997 film Gummo. Gummo was directed by Harmony "
                        "Korine, a note says.\nThen search again.\n\nQuery: who directed Gummo")


def test_plain_sentence_transformers_loads_the_folder_and_agrees_within_the_limit(saved_minilm):
    from sentence_transformers import SentenceTransformer

    model, path = saved_minilm
    st = SentenceTransformer(str(path), device="cpu")  # no folder code runs
    assert type(st.tokenizer).__name__ != "HopscotchQueryTokenizer"
    with torch.no_grad():
        ours = model.encode(model.tokenize_queries([QUERY], [REASONING]), "query")
        passages = model.encode(model.tokenize_passages(PASSAGES), "passage")
    assert cosine(passages, st.encode([t + " " + x if t else x for t, x in PASSAGES])) >= 0.9999
    assert cosine(ours, st.encode(model.format_queries([QUERY], [REASONING]))) >= 0.9999
    # the documented remaining difference: an over-long text is cut from the right, losing the query
    assert cosine(ours, st.encode([f"Reasoning: {REASONING}\n\nQuery: {QUERY}"])) < 0.99


def test_saved_folder_has_a_model_card_and_a_self_contained_query_tokenizer(saved_minilm):
    model, path = saved_minilm
    card = (path / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: sentence-transformers")
    assert "base_model: sentence-transformers/all-MiniLM-L6-v2" in card
    assert "`runs/agent/data/hotpot_tuples.jsonl`" in card and "recipe: `minilm_agent`" in card
    assert f"`{model.config.query_input}`" in card and "trust_remote_code=True" in card
    assert json.dumps(model.config.instruction) in card and "64 tokens" in card
    source = (path / "hopscotch_query_tokenizer.py").read_text()
    assert "hopscotch" not in "\n".join(line for line in source.splitlines() if "import" in line)
    compile(source, "hopscotch_query_tokenizer.py", "exec")
    config = json.loads((path / "tokenizer_config.json").read_text())
    assert config["auto_map"]["AutoTokenizer"][1] == "hopscotch_query_tokenizer.HopscotchQueryTokenizer"
    assert config["hopscotch_query"] == {"instruction": model.config.instruction, "query_max_len": 64,
                                         "query_input": model.config.query_input}
    st_config = json.loads((path / "config_sentence_transformers.json").read_text())
    assert st_config["prompts"]["query"] == model.config.instruction


def test_qwen_recipe_joins_its_instruction_exactly_as_tevatron_and_agentir():
    from hopscotch.retriever.training.recipe import load_recipe

    recipe = load_recipe(ROOT / "recipes" / "qwen3_embedding_4b_agent.yaml")
    config = recipe.encoder_config()
    assert config.instruction == AGENTIR_PREFIX
    thinking = "Gummo premiered at Venice; Korine also wrote Kids."
    expected = agentir_query("who directed Gummo", thinking)
    assert format_query("who directed Gummo", thinking, instruction=config.instruction) == expected
    assert expected.startswith(AGENTIR_PREFIX + "Reasoning: ") and "\nQuery:Reasoning: " in expected
    # the recipe's default variant on a plain reasoning string, and the empty-reasoning case
    texts = format_queries(None, None, ["who directed Gummo", "q2"], [thinking, None], instruction=config.instruction,
                           query_input=config.query_input)
    assert texts == [expected, agentir_query("q2", None)]
    # Tevatron's training text: query_prefix + the AgentIR data's query field
    assert AGENTIR_PREFIX + f"Reasoning: {thinking}\n\nQuery: who directed Gummo" == expected
    # reasoning-unaware: AgentIR's task_prefix + query
    assert format_query("q", None, instruction=config.instruction, reasoning_aware=False) == AGENTIR_PREFIX + "q"
    assert parse_query(expected, config.instruction) == ("who directed Gummo", thinking)
    assert parse_query(agentir_query("q2", None), config.instruction) == ("q2", None)
    assert parse_query("Gummo is a film.") is None


def _fake_hub_cache(home: Path, repo_id: str, model_dir: Path) -> Path:
    """The layout huggingface_hub keeps under $HF_HOME/hub: refs/main -> snapshots/<commit>/files."""
    repo = home / "hub" / ("models--" + repo_id.replace("/", "--"))
    commit = "0123456789abcdef0123456789abcdef01234567"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    shutil.copytree(model_dir, snapshot)
    return snapshot


@pytest.fixture
def hf_home(tmp_path, monkeypatch):
    home = tmp_path / "hf_home"
    monkeypatch.setenv("HF_HOME", str(home))
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    return home


def test_hub_id_resolves_from_the_local_cache_offline(hf_home, tiny_bert_dir, monkeypatch):
    from hopscotch.retriever.model.loading import bundled_minilm_path, load_sentence_transformer, resolve_model_path

    snapshot = _fake_hub_cache(hf_home, "sentence-transformers/all-MiniLM-L12-v2", tiny_bert_dir)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert Path(resolve_model_path("sentence-transformers/all-MiniLM-L12-v2")) == snapshot
    assert Path(model_settings("sentence-transformers/all-MiniLM-L12-v2").path) == snapshot
    st = load_sentence_transformer("sentence-transformers/all-MiniLM-L12-v2", device="cpu")
    assert st.encode(["Xenia, Ohio"]).shape == (1, 32)
    assert resolve_model_path("sentence-transformers/all-MiniLM-L6-v2") == bundled_minilm_path()  # the alias
    with pytest.raises(UsageError, match="not in the local Hugging Face cache.*offline"):
        resolve_model_path("someone/not-downloaded")
    with pytest.raises(UsageError, match="no such folder"):
        resolve_model_path("./no/such/folder")


def test_hub_goes_online_only_when_not_turned_off(hf_home, tiny_bert_dir, monkeypatch):
    import huggingface_hub

    from hopscotch.retriever.model.loading import resolve_model_path

    snapshot = _fake_hub_cache(hf_home, "Tevatron/tiny", tiny_bert_dir)
    calls = []

    def fake_download(repo_id, **kwargs):
        calls.append((repo_id, kwargs))
        if repo_id != "Tevatron/tiny":
            raise ConnectionError("no route to huggingface.co\nretries exhausted")
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    assert resolve_model_path("Tevatron/tiny") == str(snapshot)
    repo_id, kwargs = calls[-1]
    assert repo_id == "Tevatron/tiny"
    assert not kwargs.get("local_files_only") and kwargs["cache_dir"] == str(hf_home / "hub")
    with pytest.raises(UsageError, match=r"did not provide it \(ConnectionError: no route to huggingface.co\)"):
        resolve_model_path("Tevatron/missing")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    resolve_model_path("Tevatron/tiny")
    assert calls[-1][1]["local_files_only"] is True
