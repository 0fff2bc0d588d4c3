"""The short world's documents: one or two prose paragraphs per entity, each fact rendered by one of several
templates, and the map from each fact to the document that states it."""

from __future__ import annotations

import random

from hopscotch.data_synth.world.graph import Entity

# Each fact template takes the subject's name as {s} and the value as {v}; several phrasings per fact
# so that no two documents read alike.
FACT_TEMPLATES = {
    "occupation": ["{s} is a {v} by training.", "{s} worked for most of their life as a {v}.",
                   "Best known as a {v}, {s} published widely."],
    "birth_year": ["{s} was born in {v}.", "Born in {v}, {s} grew up far from any capital.",
                   "The records give {v} as the year of {s}'s birth."],
    "born_in": ["{s} was born in the city of {v}.", "{s} spent an early childhood in {v}, the city of their birth.",
                "{v} is the birthplace of {s}."],
    "alma_mater": ["{s} studied at {v}.", "{s} graduated from {v}.", "As a student, {s} attended {v}."],
    "employer": ["{s} has been employed by {v} for many years.", "{s} joined {v} and stayed.",
                 "At {v}, {s} led several projects."],
    "industry": ["{s} operates in the {v} industry.", "{s} is a {v} company.", "{s} built its name in {v}."],
    "founded": ["{s} was founded in {v}.", "{s} dates back to {v}.", "Established in {v}, {s} grew steadily."],
    "headquarters": ["{s} is headquartered in {v}.", "The head office of {s} stands in {v}.",
                     "{s} keeps its headquarters in {v}."],
    "founder": ["{s} was founded by {v}.", "{v} started {s}.", "The founder of {s} was {v}."],
    "population": ["{s} has a population of about {v}.", "Roughly {v} people live in {s}."],
    "river": ["The river {v} flows through {s}.", "{s} lies on the banks of the {v}."],
    "country": ["{s} is a city in {v}.", "{s} belongs to the country of {v}.", "{s} lies within {v}."],
    "continent": ["{s} is a country on the continent of {v}.", "{s} lies in {v}."],
    "currency": ["The currency of {s} is the {v}.", "{s} pays in the {v}."],
    "kind": ["{s} is a {v}.", "{s} is known as a {v}."],
    "located_in": ["{s} is located in {v}.", "The campus of {s} is in {v}."],
    "genre": ["{s} is a {v}.", "Critics describe {s} as a {v}."],
    "release_year": ["{s} was released in {v}.", "{s} premiered in {v}."],
    "director": ["{s} was directed by {v}.", "{v} directed {s}."],
    "filmed_in": ["{s} was filmed in {v}.", "Principal photography of {s} took place in {v}."],
}

FILLER = ["Little else is recorded in the public archives.", "Local newspapers covered this at length.",
          "Several biographies disagree on minor details.", "The matter drew attention from historians.",
          "A later retrospective revisited these facts.", "Contemporary accounts are sparse."]


def render_fact(rng: random.Random, fact: str, subject: str, value: str) -> str:
    return rng.choice(FACT_TEMPLATES[fact]).format(s=subject, v=value)


def render_document(rng: random.Random, subject: str, facts: list[tuple[str, str]]) -> str:
    """A short paragraph stating ``facts`` about ``subject`` in shuffled, varied sentences."""
    facts = list(facts)
    rng.shuffle(facts)
    sentences = [render_fact(rng, f, subject, v) for f, v in facts]
    if rng.random() < 0.6:
        sentences.insert(rng.randint(1, len(sentences)), rng.choice(FILLER))
    return " ".join(sentences)


def make_documents(rng: random.Random, entities: list[Entity]) -> tuple[list[dict], dict]:
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
            docs.append({"_id": docid, "title": title, "text": render_document(rng, e.name, group)})
            for fact, _ in group:
                fact_doc[(e.eid, fact)] = docid
    return docs, fact_doc

