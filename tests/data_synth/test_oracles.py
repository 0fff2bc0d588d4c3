"""Oracles: dense (tiny BERT), cross-encoder (tiny BERT), and the LLM listwise oracle against a
local fake OpenAI-compatible server (retries, malformed permutations, the disk cache)."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from hopscotch.data_synth.config import SynthConfig
from hopscotch.data_synth.oracles import Candidate, OracleInput
from hopscotch.data_synth.oracles.llm import LLMOracle, build_messages, parse_permutation
from hopscotch.data_synth.oracles.llm_client import ChatClient, LLMError, Retries
from hopscotch.data_synth.pipeline import SynthInputs, synthesize


def item(n=6, answer="Aurelia") -> OracleInput:
    cands = [Candidate(f"d{i}", f"Title {i}", f"passage {i} about the river town number {i}", float(n - i))
             for i in range(n)]
    cands[n - 2] = Candidate(f"d{n - 2}", "Lodunen", f"Lodunen lies in {answer}, beside a river.", 1.0,
                             gold=True, has_answer=True, question_gold=True)
    return OracleInput("wq1_turn2", "Lodunen continent", "I need the continent of Lodunen.", "wq1",
                       "On which continent is Lodunen?", [answer], cands)


# -- feature oracles with real (tiny) transformer backbones ------------------------------------------------------

def test_dense_oracle_scores_and_caches_passages(tiny_bert_dir):
    from hopscotch.data_synth.oracles.dense import DenseOracle

    oracle = DenseOracle(str(tiny_bert_dir))
    it = item()
    scores = oracle.score(it)
    assert len(scores) == len(it.candidates)
    assert max(range(len(scores)), key=scores.__getitem__) == len(it.candidates) - 2  # the gold passage
    assert len(oracle._docs) == len(it.candidates)
    assert oracle.score(it) == scores  # cached passages, same scores


@pytest.fixture(scope="module")
def tiny_cross_encoder_dir(tmp_path_factory):
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from hopscotch.retriever.model.loading import bundled_minilm_path

    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("tiny_ce")
    tok = AutoTokenizer.from_pretrained(bundled_minilm_path())
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def test_cross_encoder_oracle_scores_pairs(tiny_cross_encoder_dir):
    from hopscotch.data_synth.oracles.cross_encoder import CrossEncoderOracle

    oracle = CrossEncoderOracle(str(tiny_cross_encoder_dir))
    it = item()
    rel_query, rel_question = oracle.relevance(it)
    assert len(rel_query) == len(rel_question) == len(it.candidates)
    assert len(set(rel_query)) > 1  # the passages really were scored
    scores = oracle.score(it)
    assert max(range(len(scores)), key=scores.__getitem__) == len(it.candidates) - 2


def test_dense_and_cross_encoder_in_the_pipeline(small_world, tmp_path, tiny_bert_dir, tiny_cross_encoder_dir):
    common = dict(show_progress=False, max_questions=3)
    inputs = SynthInputs(small_world, traces=[small_world / "traces.jsonl"])
    a = synthesize(inputs, out=tmp_path / "dense.jsonl",
                   config=SynthConfig(reranker="dense", encoder=str(tiny_bert_dir), **common))
    b = synthesize(inputs, out=tmp_path / "ce.jsonl",
                   config=SynthConfig(reranker="cross-encoder", cross_encoder=str(tiny_cross_encoder_dir), **common))
    assert a["steps_kept"] == a["steps_read"] > 0 and b["steps_kept"] == b["steps_read"]
    assert a["config"]["encoder"] == str(tiny_bert_dir) and "encoder" not in b["config"]


# -- the LLM oracle ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("reply, n, expected", [
    ("[3] > [1] > [2]", 3, [2, 0, 1]),
    ("Sure! The ranking for 20 passages: [2] > [2] > [9] > [1]", 3, [1, 0, 2]),  # repeat, out of range, missing
    ("2, 3", 4, [1, 2, 0, 3]),              # no brackets: plain integers
    ("I cannot rank these.", 3, [0, 1, 2]),  # nothing usable: original order
    ("", 2, [0, 1]),
])
def test_parse_permutation_tolerates_malformed_replies(reply, n, expected):
    assert parse_permutation(reply, n) == expected


class FakeChatServer:
    """A local OpenAI-compatible endpoint: ranks answer-bearing passages first, in a sloppy reply format."""

    def __init__(self, fail_first=0, status=503, garbage_first=0):
        self.requests: list[dict] = []
        self.fail_first, self.status, self.garbage_first = fail_first, status, garbage_first
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                k = len(owner.requests)
                if k <= owner.fail_first:
                    self.send_response(owner.status)
                    self.end_headers()
                    return
                if k <= owner.fail_first + owner.garbage_first:
                    payload = b"<html>not json</html>"
                else:
                    prompt = body["messages"][-1]["content"]
                    answer = re.search(r"^Answer: (.*)$", prompt, re.M).group(1)
                    ids = [int(i) for i, text in re.findall(r"^\[(\d+)\] (.*)$", prompt, re.M) if answer in text]
                    others = [int(i) for i, text in re.findall(r"^\[(\d+)\] (.*)$", prompt, re.M)
                              if answer not in text]
                    order = ids + others[::-1]
                    reply = "Ranking: " + " > ".join(f"[{i}]" for i in order + [order[0], 99])
                    payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_llm_oracle_slides_a_window_and_puts_the_answer_passage_first(tmp_path):
    with FakeChatServer() as server:
        oracle = LLMOracle(ChatClient(server.url, "fake-model", api_key="k", cache_dir=tmp_path / "c"),
                           window=4, stride=2)
        it = item(n=9)
        order = oracle.rank(it)
        assert sorted(order) == list(range(9)) and order[0] == 7  # the answer passage bubbled up from rank 8
        assert len(server.requests) == 4  # windows [5,9) [3,7) [1,5) [0,4)
        req = server.requests[0]
        assert req["path"] == "/v1/chat/completions" and req["model"] == "fake-model" and req["temperature"] == 0
        assert req["auth"] == "Bearer k"
        prompt = req["messages"][-1]["content"]
        assert "Question: On which continent is Lodunen?" in prompt and "Answer: Aurelia" in prompt
        assert "Search query: Lodunen continent" in prompt
        scores = oracle.score(it)
        assert len(server.requests) == 4  # answered from the disk cache
        assert scores[7] == 9.0 and sorted(scores) == [float(i) for i in range(1, 10)]


def test_chat_client_retries_then_succeeds_and_gives_up_clearly(tmp_path):
    messages = build_messages(item(n=3), [("a", "x Aurelia"), ("b", "y"), ("c", "z")])
    with FakeChatServer(fail_first=2, garbage_first=1) as server:
        client = ChatClient(server.url, "m", retries=Retries(max_retries=3, backoff=0.01))
        assert client.complete(messages).startswith("Ranking: [1]")
        assert client.requests_sent == 4  # 503, 503, a non-JSON body, then an answer
    with FakeChatServer(fail_first=10) as server:
        with pytest.raises(LLMError, match="gave up after 3 attempts .*HTTP 503"):
            ChatClient(server.url, "m", retries=Retries(max_retries=2, backoff=0.01)).complete(messages)
    with FakeChatServer(fail_first=10, status=400) as server:
        with pytest.raises(LLMError, match="HTTP 400"):
            ChatClient(server.url, "m", retries=Retries(max_retries=5, backoff=0.01)).complete(messages)
        assert len(server.requests) == 1  # a client error is not retried


def test_llm_oracle_through_the_cli_is_cached_and_reproducible(cli, small_world, tmp_path):
    args = ["synth", "--qa", small_world, "--traces", small_world / "traces.jsonl", "--oracle", "llm",
            "--llm-model", "fake-model", "--max-questions", "3", "--llm-cache", tmp_path / "cache"]
    with FakeChatServer() as server:
        code, stdout, err = cli(*args, "--llm-base-url", server.url, "--out", tmp_path / "a.jsonl")
        assert code == 0, err
        sent = len(server.requests)
        assert sent > 0
        code, _, err = cli(*args, "--llm-base-url", server.url, "--out", tmp_path / "b.jsonl")
        assert code == 0, err
        assert len(server.requests) == sent  # everything came from the cache
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert len((tmp_path / "a.jsonl").read_text().splitlines()) > 0
    code, _, err = cli(*args[:-2], "--out", tmp_path / "c.jsonl")
    assert code == 2 and "--llm-base-url" in err
