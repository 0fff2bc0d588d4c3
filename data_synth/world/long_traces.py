"""Long mode's traces: each step's reasoning is the agent's thinking so far (300-3,000 words, growing within a
question) and its query is keyword style.

The thinking restates the question and its constraints, names candidate entities matching some clues (real
look-alikes from the graph), quotes the pages the previous steps' gold ids point to as read, plus dead ends
(look-alikes' pages, with self-corrections), and plans; its last sentence motivates the query.
``current_reasoning`` is the text written since the previous resuphrases. A query is name + relation keywords + a
distinguishing attribute; the steps whose default query left the name to the reasoning still do.
"""

from __future__ import annotations

import random

import hopscotch.data_synth.world.thinking_phrases as phrases
from hopscotch.data_synth.world.build import World
from hopscotch.data_synth.world.graph import ATTRIBUTE_QUESTIONS, NOUN, RELATIONS, YEAR_ATTRS, Graph
from hopscotch.data_synth.world.long_pages import words
from hopscotch.data_synth.world.questions import clue_text

MIN_WORDS, MAX_WORDS = 300, 3000
VERB = {"birth_year": "born", "founded": "founded", "release_year": "released"}
TOPIC = {"occupation": "the profession", "industry": "the industry", "genre": "the genre", "kind": "the kind",
         "river": "the river", "population": "the population", "continent": "the continent",
         "currency": "the currency", "birth_year": "the exact birth year", "founded": "the founding year",
         "release_year": "the release year", "birth_year_decade": "the decade of birth",
         "founded_decade": "the founding decade", "release_year_decade": "the release decade"}
ATTR_NOUN = {"occupation": "the occupation", "birth_year": "the birth year", "industry": "the industry",
             "founded": "the founding year", "river": "the river", "currency": "the currency",
             "continent": "the continent", "genre": "the genre", "release_year": "the release year",
             "kind": "the kind of institution"}


def _a(v) -> str:
    return f"{'an' if str(v)[:1].lower() in 'aeiou' else 'a'} {v}"


def attr_phrase(attr: str, v) -> str:
    """``born in the 1950s``, ``a chemist``, ``on the river Vell``, ..."""
    if attr.endswith("_decade"):
        return f"{VERB[attr[:-7]]} in the {v}s"
    if attr in YEAR_ATTRS:
        return f"{VERB[attr]} in {v}"
    return {"occupation": _a(v), "industry": f"in the {v} industry", "genre": _a(v), "kind": _a(v),
            "river": f"on the river {v}", "population": f"home to about {v} people", "continent": f"in {v}",
            "currency": f"using the {v}"}[attr]


def _value(e, attr: str):
    return e.attrs[attr[:-7]] // 10 * 10 if attr.endswith("_decade") else e.attrs.get(attr)


def _correction(e, attr: str, v) -> str | None:
    """Why ``e`` fails the clue, as a self-correction; None when it satisfies it."""
    cv = _value(e, attr)
    if cv == v:
        return None
    if attr.endswith("_decade"):
        return f"{e.name} was {VERB[attr[:-7]]} in {e.attrs[attr[:-7]]} — that was the {cv}s, not the {v}s"
    if attr in YEAR_ATTRS:
        near = " — right decade, wrong year" if cv // 10 == v // 10 else ""
        return f"{e.name} was {VERB[attr]} in {cv}, not {v}{near}"
    return f"{e.name} is {attr_phrase(attr, cv)}, not {attr_phrase(attr, v)}"


def _known(e, attr: str, v) -> str | None:
    """What ``e`` shares with the clue: the clue itself, or its decade for a year clue; None if nothing."""
    cv = _value(e, attr)
    if cv == v:
        return attr_phrase(attr, v)
    if attr in YEAR_ATTRS and cv is not None and cv // 10 == v // 10:
        return attr_phrase(attr + "_decade", v // 10 * 10)
    return None


def ask_phrase(fact: str, n: str) -> str:
    """``the city where {n} was born``, ``the founding year of {n}``, ..."""
    return RELATIONS[fact][2].format(x=n) if fact in RELATIONS else f"{ATTR_NOUN[fact]} of {n}"


# -- reasoning -----------------------------------------------------------------------------------
def _candidates(rng: random.Random, graph: Graph, anchor, clues: list) -> list:
    """Same-type look-alikes matching some (not all) clues, most matching first (3-6 of them)."""
    pool = [e for e in graph.by_type[anchor.type] if e != anchor.eid]
    scored = []
    for e in pool:
        k = sum(_known(graph.entities[e], a, v) is not None for a, v in clues)
        if k:
            scored.append((-k, rng.random(), e))
    n = rng.randint(3, 6)
    scored = sorted(scored)[:n]
    while len(scored) < min(n, len(pool)):  # too few look-alikes: add long shots
        e = rng.choice(pool)
        if all(e != s[2] for s in scored):
            scored.append((0, 0.0, e))
    return [graph.entities[e] for _, _, e in scored]


class TraceWriter:
    """Writes one question's long trace; ``short`` and ``pages`` are the default and the long text per docid."""

    def __init__(self, rng: random.Random, world: World, graph: Graph, short: dict, pages: dict, titles: dict):
        self.rng, self.world, self.graph, self.ents = rng, world, graph, world.entities
        self.short, self.pages, self.titles = short, pages, titles
        self.tokens: dict[tuple, list[int]] = {}  # (type, name word) -> entities
        for e in world.entities:
            for w in set(e.name.split()):
                self.tokens.setdefault((e.type, w), []).append(e.eid)
        self.muses: list[str] = []  # the question's musings not used yet

    def pick(self, pool: list[str], **kw) -> str:
        return self.rng.choice(pool).format(**kw)

    def fact_doc(self, eid: int, fact: str) -> str | None:
        doc = self.world.fact_doc.get((eid, fact))
        return doc if doc in self.short else None

    def read(self, docid: str, pool: list[str], **kw) -> str:
        return self.pick(pool, t=self.titles[docid], x=self.short[docid], **kw)

    def more(self, docid: str) -> str | None:
        """A sentence from further down a long page, as skimmed."""
        sections = self.pages[docid].split("\n\n")[1:]
        if not sections:
            return None
        body = self.rng.choice(sections).split("\n", 1)[-1].replace("\n", " ")
        sentence = body.split(". ")[0].rstrip(".")
        return self.pick(phrases.MORE, x=sentence + ".")

    def assemble(self, paras: list[tuple[int, str, bool]], target: int, room: int, muse: dict, first: bool) -> str:
        """Required paragraphs, then optional ones (random order) and up to three musings (at random places)
        until ``target`` words, never past ``room`` words; kept in slot order."""
        rng = self.rng
        chosen = [p for p in paras if p[2]]
        optional = [p for p in paras if not p[2]]
        rng.shuffle(optional)
        pool = [m for m in self.muses if first == (m in phrases.MUSE_FIRST)] or self.muses
        musings = [(rng.randint(1, 8), m, False) for m in pool[: rng.randint(1, 3)]]
        n = sum(words(p[1]) for p in chosen)
        for p in optional + musings:
            if n >= target:
                break
            text = p[1].format(**muse) if p in musings else p[1]
            if n + words(text) <= room:
                if p in musings:
                    self.muses.remove(p[1])
                chosen.append((p[0], text, p[2]))
                n += words(text)
        chosen.sort(key=lambda p: p[0])  # stable: ties keep the order they were added in
        return "\n\n".join(p[1] for p in chosen)

    def question(self, plan: dict, traces: list[dict]) -> list[dict]:
        rng, ents = self.rng, self.ents
        anchor = ents[plan["anchor"]]
        clues, hops, desc = plan["clues"], plan["hops"], plan["desc"]
        generic = [ask_phrase(f, f"the {NOUN[ents[s].type]}") for f, s in hops]
        self.muses = rng.sample(phrases.MUSE_FIRST + phrases.MUSE, len(phrases.MUSE_FIRST) + len(phrases.MUSE))
        cands = _candidates(rng, self.graph, anchor, clues)
        failing = {c.eid: [(a, v) for a, v in clues if _value(c, a) != v] for c in cands}
        room = MAX_WORDS - 20
        # step 1: the question, its constraints, hypotheses, a plan
        hyp = [self.pick(phrases.HYP_INTRO)]
        for i, c in enumerate(cands):
            fa, fv = failing[c.eid][0]
            known = [k for k in (_known(c, a, v) for a, v in clues) if k]
            if i == 0 and known:
                hyp.append(self.pick(phrases.STRONG, n=c.name, known=known[0], wrong=attr_phrase(fa, fv)))
            else:
                hyp.append(self.pick(phrases.HYP, n=c.name, known=(known or [_a(NOUN[c.type])])[0], unknown=TOPIC[fa]))
        notes = [f"It has to be {_a(NOUN[anchor.type])}."] + [
            self.pick(phrases.CLUE_NOTE, p=attr_phrase(a, v)[0].upper() + attr_phrase(a, v)[1:]) for a, v in clues]
        opening = self.pick(phrases.OPEN, q=plan["text"]) + " " + self.pick(phrases.CHAIN, desc=desc,
                                                                       rest=", then ".join(generic))
        noun0 = NOUN[anchor.type]
        queries = [rng.choice([f"{plan['first_kw']} {noun0}"] * 3 + [f"{noun0} {plan['first_kw']}"])]
        kw0 = RELATIONS[hops[0][0]][3] if hops[0][0] in RELATIONS else ATTRIBUTE_QUESTIONS[hops[0][0]][1]
        alt = self.pick(phrases.ALT, a=queries[0], b=f"{cands[0].name} {plan['first_kw']}", c=f"{cands[-1].name} {kw0}")
        paras = [(0, opening, True), (1, self.pick(phrases.CLUE_INTRO) + " " + " ".join(notes), True),
                 (2, " ".join(hyp), True), (4, self.pick(phrases.PLAN), True), (4, alt, False),
                 (9, self.pick(phrases.ASK_FIRST, kw=desc), True)]
        paras += [(3, self.pick(phrases.CONSIDER, c=c.name, ask=ask_phrase(hops[0][0], c.name)), False)
                  for c in cands[: rng.randint(1, 2)]]
        muse = {"c": cands[0].name, "n": cands[0].name, "last": generic[-1]}
        current = [self.assemble(paras, rng.randint(330, 520), room, muse, True)]
        while words(current[0]) < MIN_WORDS:  # a short question: think a little more
            current[0] += "\n\n" + self.pick(phrases.MUSE_FIRST, **muse)
        chain = [f"{desc} is {anchor.name}"]
        for j, (fact, src) in enumerate(hops):
            s = ents[src]
            prev_gold = traces[j]["gold_docids"]
            what = desc if j == 0 else ask_phrase(hops[j - 1][0], ents[hops[j - 1][1]].name)
            paras = [(0, " ".join(self.read(d, phrases.READ) for d in prev_gold), True),
                     (1, self.pick(phrases.CONCLUDE, what=what, n=s.name), True)]
            more = self.more(prev_gold[0])
            if more:
                paras.append((0, more, False))
            if j > 0:
                chain.append(f"{what} is {s.name}")
                paras.append((4, self.pick(phrases.RECAP, chain="; ".join(chain)), False))
            paras += self.dead_ends(j, hops, cands, failing, s)
            others = ", ".join(c.name for c in cands)
            paras.append((5, self.pick(phrases.FALLBACK, n=s.name, c=cands[0].name), False) if j == 0 else
                         (4, self.pick(phrases.STATUS, items=others, n=anchor.name), False))
            skim = [ents[rng.randrange(len(ents))].name for _ in range(rng.randint(3, 6))]
            paras.append((3, self.pick(phrases.SKIM, items=", ".join(skim), n=s.name), False))
            ask = ask_phrase(fact, s.name)
            rest = ", then ".join(generic[j + 1:])
            after = self.pick(phrases.AFTER, rest=rest) if rest else self.pick(phrases.FINAL_HOP)
            paras += [(6, self.pick(phrases.NEXT, ask=ask) + " " + after, True),
                      (9, self.pick(phrases.ASK_NEXT, ask=ask), True)]
            used = sum(words(c) for c in current)
            muse = {"c": cands[0].name, "n": s.name, "last": generic[-1]}
            current.append(self.assemble(paras, rng.randint(380, 750), room - used, muse, False))
            queries.append(self.query(j, fact, s, clues, traces[j + 1]["query"]))
        out, so_far = [], []
        for t, cur, q in zip(traces, current, queries):
            so_far.append(cur)
            out.append({**t, "reasoning": "\n\n".join(so_far), "query": q, "current_reasoning": cur})
        return out

    def dead_ends(self, j: int, hops, cands, failing, s) -> list[tuple[int, str, bool]]:
        """Optional paragraphs: look-alike pages read among the previous results, and why each is wrong."""
        rng, ents, out = self.rng, self.ents, []
        if j == 0:  # the first results: the look-alikes named as hypotheses, ruled out one by one
            ruled = []
            for i, c in enumerate(cands):
                a, v = failing[c.eid][0]
                corr = _correction(c, a, v)
                doc = self.fact_doc(c.eid, a.removesuffix("_decade"))
                if doc and (i == 0 or (len(out) < 3 and rng.random() < 0.6)):
                    why = self.pick(phrases.WHY_CANDIDATE, corr=corr, n=c.name)
                    out.append((2, self.read(doc, phrases.DEAD, why=why), i == 0))
                else:
                    ruled.append(corr)
            if ruled:
                out.append((2, self.pick(phrases.RULED, items="; ".join(ruled)), False))
            return out
        prev_fact, prev_src = hops[j - 1]
        twins = [c for c in cands if prev_fact in c.rels] if j == 1 else []
        if not twins:  # another entity of the previous hop's type, with the same relation
            pool = self.graph.by_type[ents[prev_src].type]
            twins = [ents[rng.choice(pool)] for _ in range(2)]
        for c in twins[: rng.randint(1, 2)]:
            doc = self.fact_doc(c.eid, prev_fact)
            if c.eid != prev_src and doc:
                why = self.pick(phrases.WHY_TRAP, n=c.name, m=ents[prev_src].name, noun=NOUN[c.type])
                out.append((2, self.read(doc, phrases.DEAD, why=why), False))
        word = s.name.split()[1 if s.type == "film" else 0]
        alike = [e for e in self.tokens.get((s.type, word), []) if e != s.eid]
        if alike:
            o = ents[rng.choice(alike)]
            doc = self.fact_doc(o.eid, next(iter(o.attrs)))
            if doc:
                why = self.pick(phrases.WHY_NAME, n=o.name, m=s.name, noun=NOUN[s.type])
                out.append((2, self.read(doc, phrases.DEAD, why=why), False))
        return out

    def query(self, j: int, fact: str, s, clues: list, default_query: str) -> str:
        """Keyword style: name + relation keywords + a distinguishing attribute (a clue of the anchor, else
        the entity's kind); without the name where the default query left it to the reasoning."""
        rng = self.rng
        kw = RELATIONS[fact][3] if fact in RELATIONS else ATTRIBUTE_QUESTIONS[fact][1]
        if j == 0:
            extra = clue_text(s.type, [rng.choice(clues)])[1]
        else:
            extra = NOUN[s.type] if NOUN[s.type] not in kw.split() else ""
        if not default_query.startswith(s.name + " "):
            return " ".join(x for x in (kw, extra) if x)
        forms = [(s.name, kw, extra)] * 3 + [(s.name, extra, kw), (kw, s.name, extra)]
        return " ".join(x for x in rng.choice(forms) if x)
