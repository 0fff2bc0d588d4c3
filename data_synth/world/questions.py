"""The world's multi-hop questions (2-4 steps) and their scripted agent traces.

A question is a random walk: an anchor entity described only by obfuscated attribute clues ("the chemist born
in the 1950s"), then relation hops, then optionally an attribute of the last entity. It is kept only if
evaluating it over the graph (clue sets intersected, relations followed) leaves exactly one answer entity. Its
trace gives, for each step, a reasoning text and a search query (some queries leave the entity to the
reasoning, as real agents do), with the gold documents of the step.
"""

from __future__ import annotations

import random

from hopscotch.data_synth.world.graph import ATTRIBUTE_QUESTIONS, NOUN, RELATIONS, YEAR_ATTRS, Entity, Graph

ANCHOR_SHARE = {"person": 0.45, "company": 0.2, "film": 0.2, "university": 0.1, "country": 0.05}


def clue_text(etype: str, clues: list[tuple[str, object]]) -> tuple[str, str]:
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


def _anchor_clues(rng: random.Random, graph: Graph, e: Entity) -> list | None:
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


def make_question(rng: random.Random, graph: Graph, fact_doc: dict, qid: str) -> tuple[dict, list, dict] | None:
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
    desc, first_kw = clue_text(anchor.type, clues)
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

