"""The ``llm`` oracle: RankGPT-style listwise reranking by a chat model that sees the question and answer.

The window is ranked bottom-up with a sliding window (``window`` passages, moving ``stride`` at a
time), as RankGPT does, so the best passages bubble to the top. Each prompt holds the question, its
answers, the step's query and the numbered passages; the reply is read by :func:`parse_permutation`,
which tolerates anything a model may say (see there).
"""

from __future__ import annotations

import re

from hopscotch.data_synth.oracles.base import OracleInput
from hopscotch.data_synth.oracles.llm_client import ChatClient

SYSTEM_PROMPT = ("You are RankGPT, an intelligent assistant that can rank passages based on their relevancy "
                 "to a search query.")
_BRACKETED = re.compile(r"\[\s*(\d+)\s*\]")
_NUMBER = re.compile(r"\d+")


def parse_permutation(text: str, n: int) -> list[int]:
    """0-based order of ``n`` passages from a reply like ``[3] > [1] > [2]``.

    Bracketed numbers are used when there are any (else every integer); numbers out of range and
    repeats are ignored; passages the reply leaves out keep their original order after the ranked ones.
    """
    found = _BRACKETED.findall(text or "") or _NUMBER.findall(text or "")
    order: list[int] = []
    seen: set[int] = set()
    for token in found:
        i = int(token) - 1
        if 0 <= i < n and i not in seen:
            seen.add(i)
            order.append(i)
    order.extend(i for i in range(n) if i not in seen)
    return order


def _truncate(text: str, max_words: int) -> str:
    words = text.split()
    return " ".join(words[:max_words]) + (" ..." if len(words) > max_words else "")


def build_messages(item: OracleInput, passages: list[tuple[str, str]], max_words: int = 150) -> list[dict]:
    """The listwise prompt for one window: ``passages`` is ``[(title, text)]`` in current order."""
    answers = "; ".join(item.answers) if item.answers else "unknown"
    lines = [(f"An agent answering the question below issued a search query. I will provide you with "
              f"{len(passages)} passages, each indicated by a numerical identifier []. Rank the passages by "
              f"how well each serves this search query, knowing the question and its answer."),
             "", f"Question: {item.question}", f"Answer: {answers}", f"Search query: {item.query}", ""]
    for i, (title, text) in enumerate(passages, start=1):
        body = f"{title}: {text}" if title else text
        lines.append(f"[{i}] {_truncate(body, max_words)}")
    lines += ["", f"Search query: {item.query}",
              (f"Rank the {len(passages)} passages above based on their relevance to the search query. The "
               "passages should be listed in descending order using identifiers. The most relevant passages "
               "should be listed first. The output format should be [] > [], e.g., [1] > [2]. Only respond "
               "with the ranking results, do not say any word or explain.")]
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n".join(lines)}]


class LLMOracle:
    """Listwise oracle over an OpenAI-compatible chat endpoint; scores are ``n - rank``.

    Example::

        oracle = LLMOracle(ChatClient("http://localhost:8000/v1", "my-model", cache_dir="cache"))
        scores = oracle.score(item)
    """

    name = "llm"

    def __init__(self, client: ChatClient, window: int = 20, stride: int = 10, max_words: int = 150):
        if window < 2 or not 0 < stride <= window:
            raise ValueError("the llm window needs window >= 2 and 0 < stride <= window")
        self.client, self.window, self.stride, self.max_words = client, window, stride, max_words

    def rank(self, item: OracleInput) -> list[int]:
        """Indices into ``item.candidates``, best first."""
        order = list(range(len(item.candidates)))
        n = len(order)
        end = n
        start = max(0, n - self.window)
        while True:
            part = order[start:end]
            if len(part) > 1:
                passages = [(item.candidates[i].title, item.candidates[i].text) for i in part]
                reply = self.client.complete(build_messages(item, passages, self.max_words))
                order[start:end] = [part[j] for j in parse_permutation(reply, len(part))]
            if start == 0:
                return order
            end -= self.stride
            start = max(0, start - self.stride)

    def score(self, item: OracleInput) -> list[float]:
        order = self.rank(item)
        scores = [0.0] * len(order)
        for rank, i in enumerate(order):
            scores[i] = float(len(order) - rank)
        return scores
