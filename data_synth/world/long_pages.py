"""Long mode's pages: each document of the world becomes a web-page-like text, its facts as in the default
world (the lead), then sections ("Background", "Career", "Timeline", "Related", "See also", ...) of filler about
the entity and names of other entities. The filler never states a fact of the graph, so a fact's gold document
stays the only one holding it; ids and titles are unchanged.
"""

from __future__ import annotations

import random

from hopscotch.data_synth.world.build import World
from hopscotch.data_synth.world.graph import Graph

# -- the sections' filler ------------------------------------------------------------------------
PROSE_SECTIONS = {
    "person": ["Background", "Career", "Later years", "Legacy", "Personal notes"],
    "company": ["Background", "Operations", "Corporate affairs", "Controversies", "Outlook"],
    "film": ["Production", "Release", "Reception", "Themes", "Legacy"],
    "city": ["Overview", "Economy", "Culture", "Transport", "Local government"],
    "university": ["Overview", "Academics", "Campus life", "Research", "Governance"],
    "country": ["Overview", "Politics", "Economy", "Society", "Foreign relations"],
}
PERIODS = ["In the following years", "Over the next decade", "Later on", "During this period", "Around the same time",
           "Early on", "By the end of that decade", "Some years later", "At one point", "In the years that followed",
           "More recently", "For a long stretch"]
ACTS = {
    "person": ["gave a series of public lectures on", "wrote a long essay about", "served on a committee reviewing",
               "corresponded at length about", "organised an exhibition devoted to", "took part in a survey of",
               "contributed a chapter on", "spoke to the regional press about", "led a small working group on",
               "travelled widely to study", "kept detailed notebooks on", "campaigned quietly for"],
    "company": ["opened a new warehouse for", "restructured its division for", "signed a long agreement covering",
                "invested heavily in", "published an annual report on", "faced criticism over",
                "launched a training programme in", "sold off its stake in", "lobbied for changes to",
                "ran advertising campaigns about", "commissioned an audit of"],
    "film": ["drew comparisons with earlier work on", "was discussed in essays about", "prompted a debate about",
             "was screened at retrospectives on", "influenced later productions dealing with",
             "was cited in studies of", "was restored as part of a programme on"],
    "city": ["expanded its services for", "held a referendum on", "built a new quarter around",
             "hosted an annual festival celebrating", "commissioned a study of", "invested in",
             "debated the future of", "renovated its old districts near"],
    "university": ["opened a new faculty of", "expanded its library holdings on", "hosted a conference on",
                   "launched a research centre for", "reformed its curriculum in", "received a bequest for",
                   "built new laboratories for"],
    "country": ["passed legislation on", "held a national debate about", "negotiated treaties concerning",
                "invested in", "reformed its administration of", "published a white paper on"],
}
TOPICS = ["the history of the profession", "regional archives", "public education", "old buildings",
          "methods of measurement", "early trade routes", "translation and its difficulties", "local crafts",
          "support for young researchers", "municipal records", "harbour logistics", "export markets",
          "quality control", "worker housing", "safety standards", "river navigation", "public health",
          "printing and paper", "the railways", "seasonal labour", "water supply", "street lighting",
          "orchestral music", "botanical collections", "land surveys", "cross-border commerce"]
GENERIC = [
    "{s} is mentioned in a number of regional histories, though rarely at length.",
    "Accounts of {s} vary in detail, and several sources repeat one another.",
    "An anniversary publication on {s} collected letters, photographs and minutes of meetings.",
    "Archival material relating to {s} is held in more than one collection.",
    "A short documentary profile of {s} was broadcast on regional television.",
    "Much of what is known about {s} comes from newspaper reports of the time.",
    "Writers have compared {s} with {o}, although the two have little in common.",
    "The name of {s} appears alongside {o} in several indexes and directories.",
    "Opinions on {s} changed considerably over the decades.",
    "{s} attracted a loyal following as well as persistent critics.",
    "A later retrospective revisited the record of {s} with fresh sources.",
    "Some details about {s} remain disputed among local historians.",
    "Visitors to the archives often ask about {s}, according to the curators.",
    "{o} and {s} are sometimes confused in secondary sources.",
    "A detailed bibliography on {s} lists articles, pamphlets and a handful of theses.",
    "Commentators noted that {s} rarely sought publicity.",
]
TYPED = {
    "person": ["Colleagues described {s} as meticulous and occasionally stubborn.",
               "{s} is remembered for a dry sense of humour in interviews.",
               "A collection of letters between {s} and {o} survives.",
               "{s} declined several honours, preferring to continue working.",
               "Friends recalled that {s} kept long working hours well into old age.",
               "A portrait of {s} hangs in a small regional gallery."],
    "company": ["Employees of {s} formed one of the region's early works councils.",
                "{s} has been involved in a number of supply disputes with {o}.",
                "The logo of {s} was redesigned several times.",
                "Analysts have described {s} as cautious in its expansion.",
                "{s} sponsors a modest programme of apprenticeships."],
    "film": ["The screenplay of {s} went through several drafts.",
             "Critics compared {s} unfavourably with {o} on its first release.",
             "The score of {s} was later issued on a separate recording.",
             "Some scenes of {s} were cut for its television broadcast.",
             "{s} has a small but devoted following among collectors."],
    "city": ["The old market square of {s} is a listed site.",
             "{s} is twinned with {o}.",
             "Several festivals take place in {s} each summer.",
             "The central library of {s} was rebuilt after a fire.",
             "Tram lines once crossed the centre of {s}."],
    "university": ["Students at {s} run a weekly newspaper.",
                   "{s} maintains exchange agreements with {o}.",
                   "The main hall of {s} is used for public concerts.",
                   "{s} has a rowing club with a long rivalry.",
                   "The archives of {s} hold early admission registers."],
    "country": ["{s} has a bicameral legislature.",
                "The national library of {s} holds early printed maps.",
                "{s} maintains an embassy in {o}.",
                "Public holidays in {s} include a harvest festival.",
                "{s} has a long tradition of regional dialects."],
}
EVENTS = {
    "person": ["moves to a new post", "publishes a widely cited report", "gives the annual memorial lecture",
               "takes a sabbatical abroad", "joins an editorial board", "receives a regional prize",
               "collaborates with {o}", "visits {o}", "retires from day-to-day work", "returns to public life"],
    "company": ["opens a second office", "reorganises its board", "announces a merger that is later abandoned",
                "signs a supply deal with {o}", "moves into new markets", "celebrates an anniversary",
                "faces a strike", "modernises its plants"],
    "film": ["is restored", "is re-released", "is shown at a retrospective", "is remade for television",
             "receives a new soundtrack recording", "is screened alongside {o}"],
    "city": ["opens a new bridge", "hosts a trade fair", "extends its tram network", "renovates its town hall",
             "twins with {o}", "floods after heavy rain"],
    "university": ["opens a new library", "merges two faculties", "hosts an international congress",
                   "signs an exchange agreement with {o}", "renames its main building"],
    "country": ["holds a general election", "revises its constitution", "signs a treaty with {o}",
                "hosts a regional summit", "carries out a census"],
}
RELATED = ["{o} is covered in its own article.", "For more on {o}, see the separate entry.",
           "{o} is frequently mentioned in connection with {s}.", "Readers interested in {s} often also look up {o}.",
           "The entry on {o} gives further context.", "{o} is not to be confused with {s}."]


def words(text: str) -> int:
    return len(text.split())


# -- writing a page ------------------------------------------------------------------------------
def _short(e) -> str:
    return e.name.split()[-1] if e.type == "person" else e.name.split()[0] if e.type == "company" else e.name


def _start_year(e) -> int:
    if "birth_year" in e.attrs:
        return min(e.attrs["birth_year"] + 20, 2015)
    return min(e.attrs.get("founded") or e.attrs.get("release_year") or 1850, 2015)


def _prose(rng: random.Random, e, names: list[str], unused: list[str]) -> str:
    """A filler sentence: an activity (period, verb, topic) or one of the page's ``unused`` templates."""
    s = e.name if rng.random() < 0.5 else _short(e)
    if not unused or rng.random() < 0.55:
        return f"{rng.choice(PERIODS)}, {s} {rng.choice(ACTS[e.type])} {rng.choice(TOPICS)}."
    return unused.pop().format(s=s, o=rng.choice(names))


def _page(rng: random.Random, e, lead: str, linked: list[str], lookalikes: list[str], names: list[str]) -> str:
    r = rng.random()
    lo, hi = (150, 300) if r < 0.15 else (300, 800) if r < 0.75 else (800, 1500)
    target = rng.randint(lo, hi)
    parts, n = [lead], words(lead)
    tail = []
    if rng.random() < 0.6:
        years = sorted(rng.sample(range(_start_year(e), 2025), min(rng.randint(4, 10), 2025 - _start_year(e))))
        lines = [f"{y} – {_short(e)} " + rng.choice(EVENTS[e.type]).format(o=rng.choice(names)) + "."
                 for y in years]
        tail.append("Timeline\n" + "\n".join(lines))
    related = linked + lookalikes
    if related and rng.random() < 0.7:
        tail.append("Related\n" + " ".join(rng.choice(RELATED).format(o=o, s=e.name) for o in related))
    see = list(dict.fromkeys(related + rng.sample(names, 4)))[: rng.randint(3, 6)]
    tail.append("See also\n" + " · ".join(see))
    budget = target - sum(words(t) for t in tail)
    sections = PROSE_SECTIONS[e.type][:]
    rng.shuffle(sections)
    unused = rng.sample(GENERIC + TYPED[e.type], len(GENERIC) + len(TYPED[e.type]))
    for i, header in enumerate(sections):
        if i and n >= budget:
            break
        k = max(3, min(30, (budget - n) // 14 + 1))
        body = " ".join(_prose(rng, e, names, unused) for _ in range(rng.randint(max(3, k // 2), k)))
        parts.append(f"{header}\n{body}")
        n += words(body)
    return "\n\n".join(parts + tail)


def lengthen_documents(rng: random.Random, world: World, graph: Graph) -> list[dict]:
    ents = world.entities
    names = [e.name for e in ents]
    doc_facts: dict[str, list] = {}
    for (eid, fact), docid in world.fact_doc.items():
        doc_facts.setdefault(docid, []).append((eid, fact))
    out = []
    for d in world.documents:
        facts = doc_facts[d["_id"]]
        e = ents[facts[0][0]]
        linked = [ents[e.rels[f]].name for _, f in facts if f in e.rels]
        attr = rng.choice(sorted(e.attrs))
        alike = sorted(graph.index.get((attr, e.attrs[attr]), set()) - {e.eid})
        lookalikes = [ents[i].name for i in rng.sample(alike, min(len(alike), rng.randint(0, 3)))]
        out.append({**d, "text": _page(rng, e, d["text"], linked, lookalikes, names)})
    return out

