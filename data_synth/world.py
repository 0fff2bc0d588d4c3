"""The embedded world: a seeded synthetic knowledge graph, its documents, multi-hop questions and traces.

It is the default data on a fresh machine (no downloads). ``build_world(seed, docs, questions)`` makes:

* typed entities (people, companies, films, cities, universities, countries) with attributes drawn from
  small pools, so many entities share them, plus explicit distractors that copy another entity's
  occupation and birth decade;
* functional relations between them (born in, works for, headquartered in, directed by, ...);
* one or two prose documents per entity, each fact rendered by one of several templates;
* multi-hop questions (2-4 steps) made by random walks: an anchor entity described only by
  obfuscated attribute clues ("the chemist born in the 1950s"), then relation hops, then optionally an
  attribute of the last entity. A question is kept only if evaluating it over the graph (clue sets
  intersected, relations followed) leaves exactly one answer entity;
* a scripted agent trace per question: for each step, a reasoning text and a search query (some
  queries leave the entity to the reasoning, as real agents do), with the gold documents of the step.

``write_world(world, out)`` writes a BEIR folder plus ``traces.jsonl``.
:func:`hopscotch.data_synth.world_long.build_long_world` makes the long-reasoning version (multi-section
pages, 300-3,000-word agent thinking, keyword queries; same questions and gold).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from hopscotch.data_synth import world_text as wt

# relation: (source type, target type, question phrase of the target given {x}, query keywords,
#            what the agent asks for given a name {n})
RELATIONS = {
    "born_in": ("person", "city", "the city where {x} was born", "birthplace city", "the city where {n} was born"),
    "alma_mater": ("person", "university", "the school that {x} attended", "studied at university",
                   "the school {n} attended"),
    "employer": ("person", "company", "the company that employs {x}", "employer company", "who employs {n}"),
    "headquarters": ("company", "city", "the city where {x} is headquartered", "headquarters city",
                     "where {n} is headquartered"),
    "founder": ("company", "person", "the founder of {x}", "founded by founder", "who founded {n}"),
    "country": ("city", "country", "the country that {x} belongs to", "city in country", "which country {n} is in"),
    "located_in": ("university", "city", "the city where {x} is located", "campus located in city",
                   "where {n} is located"),
    "director": ("film", "person", "the director of {x}", "directed by director", "who directed {n}"),
    "filmed_in": ("film", "city", "the city where {x} was filmed", "filmed in city", "where {n} was filmed"),
}
# final attribute: (question template, query keywords, what the agent asks for)
ATTRIBUTE_QUESTIONS = {
    "occupation": ("What is the occupation of {x}?", "occupation profession", "the occupation of {n}"),
    "birth_year": ("In what year was {x} born?", "born year birth", "the birth year of {n}"),
    "industry": ("In what industry does {x} operate?", "industry company", "the industry of {n}"),
    "founded": ("In what year was {x} founded?", "founded year established", "when {n} was founded"),
    "river": ("Which river flows through {x}?", "river flows through", "the river of {n}"),
    "currency": ("What is the currency of {x}?", "currency", "the currency of {n}"),
    "continent": ("On which continent is {x}?", "continent", "the continent of {n}"),
    "genre": ("What genre is {x}?", "genre film", "the genre of {n}"),
    "release_year": ("In what year was {x} released?", "released year premiere", "the release year of {n}"),
    "kind": ("What kind of institution is {x}?", "kind of institution", "what kind of institution {n} is"),
}
# per type: attributes, relations, and the split of facts into documents
TYPE_SPEC = {
    "person": (("occupation", "birth_year"), ("born_in", "alma_mater", "employer")),
    "company": (("industry", "founded"), ("headquarters", "founder")),
    "film": (("genre", "release_year"), ("director", "filmed_in")),
    "city": (("population", "river"), ("country",)),
    "university": (("kind", "founded"), ("located_in",)),
    "country": (("continent", "currency"), ()),
}
TYPE_SHARE = {"person": 0.40, "company": 0.15, "film": 0.15, "city": 0.15, "university": 0.10, "country": 0.05}
ANCHOR_SHARE = {"person": 0.45, "company": 0.2, "film": 0.2, "university": 0.1, "country": 0.05}
YEAR_ATTRS = {"birth_year", "founded", "release_year"}
NOUN = {"person": "person", "company": "company", "film": "film", "city": "city", "university": "institution",
        "country": "country"}


@dataclass
class Entity:
    eid: int
    type: str
    name: str
    attrs: dict = field(default_factory=dict)
    rels: dict = field(default_factory=dict)  # relation -> target eid


@dataclass
class World:
    seed: int
    entities: list[Entity]
    documents: list[dict]            # {_id, title, text}
    fact_doc: dict                   # (eid, fact) -> docid
    questions: list[dict]            # {_id, text, answers, hops}
    traces: list[dict]               # {question_id, step, reasoning, query, gold_docids}
    plans: dict = field(default_factory=dict, repr=False)  # qid -> how the question was made (not written)
    extra_stats: dict = field(default_factory=dict)       # merged into world.json (long mode's lengths)


def _attr_value(rng: random.Random, etype: str, attr: str, namer) -> str | int:
    if attr == "occupation":
        return rng.choice(wt.OCCUPATIONS)
    if attr == "birth_year":
        return rng.randint(1920, 1999)
    if attr == "industry":
        return rng.choice(wt.INDUSTRIES)
    if attr == "founded":
        return rng.randint(1700, 1999) if etype == "university" else rng.randint(1850, 2015)
    if attr == "genre":
        return rng.choice(wt.GENRES)
    if attr == "release_year":
        return rng.randint(1930, 2024)
    if attr == "population":
        return f"{rng.randint(2, 900) * 1000:,}"
    if attr == "river":
        return rng.choice(wt.RIVERS)
    if attr == "kind":
        return rng.choice(wt.UNI_KINDS)
    if attr == "continent":
        return rng.choice(wt.CONTINENTS)
    if attr == "currency":
        return namer("country").lower() + " " + rng.choice(["crown", "mark", "florin", "dinar", "real"])
    raise ValueError(attr)


def _make_entities(rng: random.Random, n_entities: int) -> list[Entity]:
    namer = wt.make_namer(rng)
    counts = {t: max(5, round(share * n_entities)) for t, share in TYPE_SHARE.items()}
    entities: list[Entity] = []
    by_type: dict[str, list[int]] = {t: [] for t in TYPE_SPEC}
    for etype in ("country", "city", "university", "company", "person", "film"):
        attrs, _ = TYPE_SPEC[etype]
        for _ in range(counts[etype]):
            e = Entity(len(entities), etype, namer(etype))
            e.attrs = {a: _attr_value(rng, etype, a, namer) for a in attrs}
            if etype == "person" and by_type["person"] and rng.random() < 0.3:
                twin = entities[rng.choice(by_type["person"])]  # distractor: same job, same decade
                e.attrs["occupation"] = twin.attrs["occupation"]
                e.attrs["birth_year"] = twin.attrs["birth_year"] // 10 * 10 + rng.randint(0, 9)
            entities.append(e)
            by_type[etype].append(e.eid)
    for e in entities:
        for rel in TYPE_SPEC[e.type][1]:
            e.rels[rel] = rng.choice(by_type[RELATIONS[rel][1]])
    return entities


def _make_documents(rng: random.Random, entities: list[Entity]) -> tuple[list[dict], dict]:
    docs: list[dict] = []
    fact_doc: dict = {}
    for e in entities:
        facts = [(a, str(v)) for a, v in e.attrs.items()]
        facts += [(r, entities[t].name) for r, t in e.rels.items()]
        rng.shuffle(facts)
        groups = [facts]
        if len(facts) >= 4 and rng.random() < 0.45:
            cut = rng.randint(2, len(facts) - 2)
            groups = [facts[:cut], facts[cut:]]
        for i, group in enumerate(groups):
            docid = f"w{len(docs):06d}"
            title = e.name if i == 0 else f"{e.name} ({rng.choice(['history', 'career', 'details', 'profile'])})"
            docs.append({"_id": docid, "title": title, "text": wt.render_document(rng, e.name, group)})
            for fact, _ in group:
                fact_doc[(e.eid, fact)] = docid
    return docs, fact_doc


class _Graph:
    """Attribute indexes for evaluating clue sets quickly."""

    def __init__(self, entities: list[Entity]):
        self.entities = entities
        self.index: dict[tuple, set[int]] = {}
        self.by_type: dict[str, list[int]] = {}
        for e in entities:
            self.by_type.setdefault(e.type, []).append(e.eid)
            self.index.setdefault(("type", e.type), set()).add(e.eid)
            for a, v in e.attrs.items():
                self.index.setdefault((a, v), set()).add(e.eid)
                if a in YEAR_ATTRS:
                    self.index.setdefault((a + "_decade", v // 10 * 10), set()).add(e.eid)

    def matching(self, etype: str, clues: list[tuple[str, object]]) -> set[int]:
        found = set(self.index[("type", etype)])
        for clue in clues:
            found &= self.index.get(clue, set())
        return found

    def follow(self, eids: set[int], rel: str) -> set[int]:
        return {self.entities[e].rels[rel] for e in eids if rel in self.entities[e].rels}


def _clue_text(etype: str, clues: list[tuple[str, object]]) -> tuple[str, str]:
    """(description for the question, keywords for the first query)."""
    parts, kws = [], []
    noun = NOUN[etype]
    for attr, v in clues:
        if attr in ("occupation", "industry", "genre", "kind"):
            noun = {"industry": f"{v} company", "genre": f"{v}", "kind": f"{v}"}.get(attr, str(v))
            kws.append(str(v))
        elif attr.endswith("_decade"):
            verb = {"birth_year": "born", "founded": "founded", "release_year": "released"}[attr[:-7]]
            parts.append(f"{verb} in the {v}s")
            kws.append(f"{verb} {v}s")
        elif attr in YEAR_ATTRS:
            verb = {"birth_year": "born", "founded": "founded", "release_year": "released"}[attr]
            parts.append(f"{verb} in {v}")
            kws.append(f"{verb} {v}")
        elif attr == "river":
            parts.append(f"on the river {v}")
            kws.append(f"river {v}")
        elif attr == "population":
            parts.append(f"with about {v} inhabitants")
            kws.append(f"population {v}")
        elif attr == "continent":
            parts.append(f"in {v}")
            kws.append(str(v))
        elif attr == "currency":
            parts.append(f"that pays in the {v}")
            kws.append(f"currency {v}")
    desc = f"the {noun}" + (" " + " and ".join(parts) if parts else "")
    return desc, " ".join(kws)


def _anchor_clues(rng: random.Random, graph: _Graph, e: Entity) -> list | None:
    """Grow obfuscated clues about ``e`` until it is the only match; None if they never single it out."""
    attrs = list(e.attrs)
    rng.shuffle(attrs)
    candidates = []
    for a in attrs:
        if a == "population":  # near-unique: it would give the anchor away
            continue
        if a in YEAR_ATTRS:
            candidates += [(a + "_decade", e.attrs[a] // 10 * 10), (a, e.attrs[a])]
        else:
            candidates.append((a, e.attrs[a]))
    clues: list = []
    for clue in candidates:
        if clue[0] in YEAR_ATTRS:  # an exact year replaces its decade clue
            clues = [c for c in clues if c[0] != clue[0] + "_decade"]
        clues.append(clue)
        if graph.matching(e.type, clues) == {e.eid}:
            return clues
    return None


def _make_question(rng: random.Random, graph: _Graph, fact_doc: dict, qid: str) -> tuple[dict, list, dict] | None:
    ents = graph.entities
    anchor_type = rng.choices(list(ANCHOR_SHARE), weights=list(ANCHOR_SHARE.values()))[0]
    anchor = ents[rng.choice(graph.by_type[anchor_type])]
    clues = _anchor_clues(rng, graph, anchor)
    if clues is None:
        return None
    n_steps = rng.randint(2, 4)
    path, rels = [anchor.eid], []
    while len(rels) < n_steps - 1:
        options = [r for r in ents[path[-1]].rels if ents[path[-1]].rels[r] not in path]
        if not options:
            break
        rel = rng.choice(sorted(options))
        rels.append(rel)
        path.append(ents[path[-1]].rels[rel])
    if not rels:
        return None
    last = ents[path[-1]]
    attr_options = [a for a in last.attrs if a in ATTRIBUTE_QUESTIONS]
    use_attr = len(rels) + 1 < n_steps and attr_options
    attr = rng.choice(sorted(attr_options)) if use_attr else None
    # uniqueness over the graph: clues -> exactly one anchor, relations -> exactly one answer entity
    found = graph.matching(anchor.type, clues)
    for rel in rels:
        found = graph.follow(found, rel)
    if found != {last.eid}:
        return None
    desc, first_kw = _clue_text(anchor.type, clues)
    nested = desc
    for rel in rels:
        nested = RELATIONS[rel][2].format(x=nested)
    if attr:
        text, answer = ATTRIBUTE_QUESTIONS[attr][0].format(x=nested), str(last.attrs[attr])
    else:
        text, answer = f"Name {nested}.", last.name
    text = text[0].upper() + text[1:]
    # scripted trace
    steps = []
    reasoning = (f"The question asks: {text} To answer it I first need to identify {desc}. "
                 f"The clues are: {first_kw}.")
    gold0 = sorted({fact_doc.get((anchor.eid, c[0].removesuffix('_decade')), "") for c in clues})
    steps.append((reasoning, f"{first_kw} {NOUN[anchor.type]}", gold0))
    hops = [(rel, path[i]) for i, rel in enumerate(rels)] + ([(attr, path[-1])] if attr else [])
    for fact, src in hops:
        name = ents[src].name
        kw, ask = (RELATIONS[fact][3], RELATIONS[fact][4]) if fact in RELATIONS else ATTRIBUTE_QUESTIONS[fact][1:]
        reasoning += f" The search results show this is {name}. Next I need {ask.format(n=name)}."
        query = f"{name} {kw}" if rng.random() < 0.6 else kw  # an implicit query leaves the name to the reasoning
        steps.append((reasoning, query, [fact_doc.get((src, fact), "")]))
    traces = [{"question_id": qid, "step": i + 1, "reasoning": r, "query": q, "gold_docids": g}
              for i, (r, q, g) in enumerate(steps)]
    gold = sorted({d for _, _, g in steps for d in g})
    plan = {"anchor": anchor.eid, "clues": clues, "desc": desc, "first_kw": first_kw, "text": text, "hops": hops}
    return {"_id": qid, "text": text, "answers": [answer], "hops": len(steps), "gold_docids": gold}, traces, plan


def build_world(seed: int = 13, docs: int = 2000, questions: int = 200) -> World:
    """Build the world deterministically from ``seed``: about ``docs`` documents and ``questions`` questions.
    Its long-reasoning version is :func:`hopscotch.data_synth.world_long.build_long_world` (made from this one
    with a separate random sequence, so the default world is the same either way)."""
    rng = random.Random(seed)
    scale = 1.3
    while True:  # grow the graph until it renders at least `docs` documents, then cut to size
        entities = _make_entities(rng, max(40, int(docs / scale)))
        documents, fact_doc = _make_documents(rng, entities)
        if len(documents) >= docs:
            break
        scale *= 0.95
    documents = documents[:docs] if len(documents) > docs else documents
    kept = {d["_id"] for d in documents}
    fact_doc = {k: v for k, v in fact_doc.items() if v in kept}
    graph = _Graph(entities)
    qs, traces, seen, plans = [], [], set(), {}
    attempts = 0
    while len(qs) < questions:
        attempts += 1
        if attempts > 50 * questions + 1000:
            raise RuntimeError(f"could only make {len(qs)} unique questions from a world of {len(documents)} docs")
        made = _make_question(rng, graph, fact_doc, f"wq{len(qs):05d}")
        if made is None or made[0]["text"] in seen:
            continue
        if any(d not in kept for t in made[1] for d in t["gold_docids"]):  # a fact cut with the corpus
            continue
        seen.add(made[0]["text"])
        qs.append(made[0])
        traces.extend(made[1])
        plans[made[0]["_id"]] = made[2]
    return World(seed, entities, documents, fact_doc, qs, traces, plans)


def write_world(world: World, out: str | Path) -> dict:
    """Write ``corpus.jsonl``, ``queries.jsonl``, ``qrels.tsv``, ``traces.jsonl`` and ``world.json``."""
    from hopscotch.data_synth.trace_readers import write_trace_file
    from hopscotch.retriever.io.common import atomic_write, write_json, write_jsonl

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "corpus.jsonl", world.documents)
    write_jsonl(out / "queries.jsonl", ({k: v for k, v in q.items() if k != "gold_docids"} for q in world.questions))
    with atomic_write(out / "qrels.tsv") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for q in world.questions:
            fh.writelines(f"{q['_id']}\t{d}\t1\n" for d in q["gold_docids"])
    write_trace_file(out / "traces.jsonl", world.traces)
    stats = {"seed": world.seed, "entities": len(world.entities), "documents": len(world.documents),
             "questions": len(world.questions), "trace_steps": len(world.traces),
             "hops": {str(h): sum(q["hops"] == h for q in world.questions) for h in (2, 3, 4)}, **world.extra_stats}
    write_json(out / "world.json", stats)
    return stats
