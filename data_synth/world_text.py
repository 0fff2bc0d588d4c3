"""Names, vocabularies and prose templates for the embedded synthetic world (:mod:`hopscotch.data_synth.world`)."""

from __future__ import annotations

import random

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
                n = f"The {rng.choice(FILM_ADJ)} {rng.choice(FILM_NOUN)}" + rng.choice(["", "", " II", f" of {word(2, 2)}"])
            else:
                raise ValueError(kind)
            if n not in used:
                used.add(n)
                return n
        raise RuntimeError(f"ran out of unique {kind} names")

    return name


# -- prose ---------------------------------------------------------------------------------------
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
