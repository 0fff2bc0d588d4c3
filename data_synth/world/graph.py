"""The embedded world's knowledge graph: entity types with their attributes and relations, the pools names and
attribute values are drawn from, the seeded entities, and the attribute index that evaluates clue sets.

Attributes are drawn from small pools, so many entities share them, plus explicit distractors that copy another
entity's occupation and birth decade; relations are functional (born in, works for, headquartered in, directed
by, ...). :data:`RELATIONS` and :data:`ATTRIBUTE_QUESTIONS` also say how questions and queries phrase each fact.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

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
YEAR_ATTRS = {"birth_year", "founded", "release_year"}
NOUN = {"person": "person", "company": "company", "film": "film", "city": "city", "university": "institution",
        "country": "country"}


# -- names and attribute values ------------------------------------------------------------------
SYLLABLES = ["ka", "lo", "mir", "van", "tes", "ro", "dal", "bri", "en", "sol", "qua", "neth", "or", "vel",
             "tam", "zu", "fen", "hal", "ix", "mar", "po", "ren", "sil", "tor", "ul", "yar", "cor", "dun",
             "ela", "gri", "jo", "ker", "lin", "mo", "nar", "pel", "rus", "sta", "thi", "wen"]

OCCUPATIONS = ["chemist", "architect", "novelist", "economist", "violinist", "astronomer", "sculptor",
               "surgeon", "linguist", "cartographer", "botanist", "film editor", "diplomat", "geologist"]
INDUSTRIES = ["shipbuilding", "pharmaceuticals", "textiles", "aerospace", "publishing", "brewing",
              "semiconductors", "insurance", "mining", "robotics", "cosmetics", "rail transport"]
GENRES = ["noir thriller", "musical comedy", "space opera", "historical drama", "documentary", "western",
          "coming-of-age drama", "heist film", "animated fable", "courtroom drama"]
CONTINENTS = ["Aurelia", "Borealis", "Cindara", "Meridia", "Ostrava Minor"]
RIVERS = ["Vell", "Amsor", "Tarn", "Quill", "Oresund", "Lethe", "Marrow", "Silt", "Kettle", "Brae"]
UNI_KINDS = ["public research university", "private liberal arts college", "technical institute",
             "conservatory", "military academy"]
COMPANY_SUFFIX = ["Industries", "Works", "Holdings", "Group", "Labs", "& Sons", "Consolidated", "Systems"]
FILM_ADJ = ["Silent", "Crimson", "Last", "Hollow", "Golden", "Broken", "Northern", "Paper", "Iron", "Quiet"]
FILM_NOUN = ["Harbor", "Orchard", "Signal", "Lantern", "Meridian", "Archive", "Tide", "Carousel", "Ledger"]


def make_namer(rng: random.Random):
    """Return ``name(kind)`` producing unique, pronounceable names for each entity kind."""
    used: set[str] = set()

    def word(lo: int, hi: int) -> str:
        return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(lo, hi))).capitalize()

    def name(kind: str) -> str:
        for _ in range(1000):
            if kind == "person":
                n = f"{word(1, 2)} {word(2, 3)}"
            elif kind in ("city", "country"):
                n = word(2, 3) + rng.choice(["", "", "ia", "holt", "burg", "mere", "stad"] if kind == "city"
                                            else ["ia", "land", "ora", "stan", ""])
            elif kind == "company":
                n = f"{word(2, 3)} {rng.choice(COMPANY_SUFFIX)}"
            elif kind == "university":
                n = rng.choice(["University of {}", "{} Institute", "{} College", "{} Polytechnic"]).format(word(2, 3))
            elif kind == "film":
                n = (f"The {rng.choice(FILM_ADJ)} {rng.choice(FILM_NOUN)}"
                     + rng.choice(["", "", " II", f" of {word(2, 2)}"]))
            else:
                raise ValueError(kind)
            if n not in used:
                used.add(n)
                return n
        raise RuntimeError(f"ran out of unique {kind} names")

    return name



@dataclass
class Entity:
    eid: int
    type: str
    name: str
    attrs: dict = field(default_factory=dict)
    rels: dict = field(default_factory=dict)  # relation -> target eid


def _attr_value(rng: random.Random, etype: str, attr: str, namer) -> str | int:
    if attr == "occupation":
        return rng.choice(OCCUPATIONS)
    if attr == "birth_year":
        return rng.randint(1920, 1999)
    if attr == "industry":
        return rng.choice(INDUSTRIES)
    if attr == "founded":
        return rng.randint(1700, 1999) if etype == "university" else rng.randint(1850, 2015)
    if attr == "genre":
        return rng.choice(GENRES)
    if attr == "release_year":
        return rng.randint(1930, 2024)
    if attr == "population":
        return f"{rng.randint(2, 900) * 1000:,}"
    if attr == "river":
        return rng.choice(RIVERS)
    if attr == "kind":
        return rng.choice(UNI_KINDS)
    if attr == "continent":
        return rng.choice(CONTINENTS)
    if attr == "currency":
        return namer("country").lower() + " " + rng.choice(["crown", "mark", "florin", "dinar", "real"])
    raise ValueError(attr)


def make_entities(rng: random.Random, n_entities: int) -> list[Entity]:
    namer = make_namer(rng)
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


class Graph:
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
