"""Templates for the embedded world's long-reasoning mode (:mod:`hopscotch.data_synth.world_long`).

Two banks: page sections (web-page-like prose around an entity's facts, which never states a fact of
the graph, so the gold document of a fact stays the only one holding it) and agent thinking (restating,
hypotheses, reading results, dead ends, self-corrections, planning), in the voice of deep-research agents.
"""

from __future__ import annotations

# -- pages ---------------------------------------------------------------------------------------
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

# -- agent thinking ------------------------------------------------------------------------------
OPEN = ["Okay, let me work through this carefully. The question is: \"{q}\"",
        "Let me start by restating what is being asked. {q}",
        "Alright, the user asks: \"{q}\" Let me break this down before searching.",
        "Hmm, this is a multi-hop question. It reads: \"{q}\"",
        "Let me parse the question first: \"{q}\" There are several layers here."]
CHAIN = ["So the structure is: first identify {desc}; then {rest}.",
         "The chain of lookups is: {desc} first, then {rest}.",
         "In other words I need {desc}, and from there {rest}.", "Step one is {desc}; after that, {rest}."]
CLUE_INTRO = ["The constraints on the first entity are:", "What do I actually know about it? The clues are:",
              "Let me list the constraints one by one:", "The description gives me these clues:"]
CLUE_NOTE = ["{p} — that narrows things somewhat, but many entries will share it.",
             "{p} — a useful filter, though on its own it is weak.",
             "{p} — this is probably the most distinctive clue.", "{p} — I should not rely on this alone.",
             "{p} — worth checking exactly, since look-alikes are likely."]
HYP_INTRO = ["Before searching, which names could fit? A few come to mind that match part of the description.",
             "Let me think about candidates. Several names match some of the clues, but I doubt any matches "
             "all of them yet.",
             "Possible candidates, from what I half-remember (to be verified):",
             "There are a few names I associate with parts of this description."]
HYP = ["{n} comes to mind — {known}, I believe, but I am not sure about {unknown}.",
       "What about {n}? I associate that name with being {known}; {unknown} I cannot confirm yet.",
       "{n} might fit: {known} seems right, but I need to check {unknown}.",
       "Maybe {n} — {known}, if I remember correctly. Still open until I see {unknown}.",
       "{n} is another possibility ({known}), although {unknown} is unclear to me."]
PLAN = ["I'll search with the clue keywords and see which pages come up.",
        "The best first move is a keyword search on the clues, then compare each hit against every constraint.",
        "Let me search for the distinctive clues together and scan the titles of the results.",
        "A direct keyword query should surface candidate pages; then I verify each clue on the page itself."]
MUSE_FIRST = [
    "I should be careful not to anchor on the first plausible name; archives like this contain several "
    "near-identical profiles.",
    "One risk is that two pages describe entities with almost the same profile, so every clue has to be "
    "checked, not just the first one that matches.",
    "If the direct search fails, a fallback is to search the clue keywords alone and scan the result titles.",
    "I'll keep track of what is confirmed and what is only assumed, because a mistake in an early hop "
    "propagates to the final answer.",
    "Let me not forget the final part of the question: {last}.",
    "The question wording is precise, so partial matches are not enough; each step must match exactly.",
    "Keyword queries work better than full sentences with this search engine, so I will keep the query short "
    "and specific.",
    "Hmm, let me reconsider whether I parsed the question correctly. It asks for {last}, so the intermediate "
    "entities only matter as stepping stones.",
    "Note to self: {c} and similar names may belong to different entries; match on the facts, not the name alone."]
MUSE = [
    "The pages I have seen so far are long and mix in a lot of unrelated material, so I need to read the lead "
    "paragraphs closely.",
    "It is possible the fact I need sits on a secondary page (history, career, details), not on the main "
    "entry for {n}.",
    "So far the evidence is consistent, but I have been wrong about look-alikes before in this question, so I "
    "will double-check.",
    "I could also try a broader query, but a narrow one with the name is usually better for this kind of lookup.",
    "There is also the possibility that the search engine ranks a related page above the one I need; I will "
    "scan beyond the first result.",
    "I want a page that states the relation explicitly, not one that merely mentions both names in passing.",
    "Wait, before going on: is {n} definitely the right entry, not a namesake? The page matched on the facts, so yes.",
    "If two pages disagree, I will trust the one whose lead paragraph states the fact directly.",
    "The result snippets are long and noisy; the key sentence is usually near the top of the page.",
    "Let me also keep a list of the names I have already ruled out so I do not revisit them.",
    "I am fairly confident about the chain so far, but the final step still needs {last}."]
CONSIDER = ["Suppose it is {c}: then the next thing to find would be {ask}. But I should not build on an "
            "unverified guess.",
            "If {c} turns out to be right, I would then look for {ask}; if not, I am back to the clue search.",
            "Say it were {c} — the follow-up would be {ask}. Let me hold that thought until the clues are checked."]
ALT = ["Possible queries: \"{a}\", \"{b}\", or \"{c}\". The first is the most general, so I'll start there.",
       "I could search \"{b}\" or \"{c}\", but a query built from the clues (\"{a}\") avoids assuming a name.",
       "Options for the first query: \"{a}\"; \"{b}\"; \"{c}\". Better not to presuppose a candidate."]
FALLBACK = ["If {n} turned out to be wrong, the fallback would be {c}, the closest look-alike; but the page "
            "matched every clue, so I'll continue with {n}.",
            "For the record, {c} was the runner-up, but it fails a clue, so {n} it is.",
            "I briefly considered {c} instead of {n}, but the clues settle it."]
STATUS = ["Of the earlier candidates ({items}), none survived the first check, so the chain rests on {n}.",
          "The names I considered at the start ({items}) are all out; only {n} fitted.",
          "Keeping the ruled-out names in mind ({items}), the chain goes through {n}."]
READ = ["The search returned a page titled \"{t}\". It reads: \"{x}\"", "The top result is \"{t}\": \"{x}\"",
        "Looking at the results, \"{t}\" says: \"{x}\"", "From the page \"{t}\": \"{x}\"",
        "One of the hits, \"{t}\", states: \"{x}\""]
CONCLUDE = ["So {what} is {n}. That fits every clue.", "That settles it: {what} is {n}.",
            "Good — {what} is {n}.", "So {n} is {what}; the page states it directly.",
            "This confirms that {what} is {n}."]
DEAD = ["Another result was \"{t}\": \"{x}\" {why}", "I also opened \"{t}\", which says: \"{x}\" {why}",
        "A second hit, \"{t}\", looked promising: \"{x}\" {why}", "There was also \"{t}\": \"{x}\" {why}"]
WHY_CANDIDATE = ["But wait — {corr}. So {n} is out.", "Hmm, {corr}; {n} does not fit. Dead end.",
                 "That looked right at first, but {corr}. Ruling out {n}.", "No — {corr}. {n} is ruled out."]
WHY_TRAP = ["But that is about {n}, not {m}; {n} was already ruled out, so this is a dead end.",
            "That is the wrong entity: the page is about {n}, while I need {m}. Ignore it.",
            "Careful — this describes {n}, which only resembles our {noun}. Not useful."]
WHY_NAME = ["Similar name, but this is {n}, not {m}. Dead end.", "That is {n}, a different {noun} from {m}; skip it.",
            "Wait, I misread — this page is about {n}, not {m}."]
RULED = ["Also ruled out: {items}.", "The remaining candidates fail too: {items}.",
         "Checking the others against the clues: {items}. None of them fits."]
SKIM = ["The other results were less useful: pages on {items}, none of which mentions {n}.",
        "Skimming the remaining titles: {items}. Nothing there about {n}.",
        "The rest of the result list ({items}) is unrelated to {n}."]
RECAP = ["Recap so far: {chain}.", "What I have established: {chain}.", "Let me summarise the chain so far: {chain}."]
NEXT = ["Next I need {ask}.", "The next hop is {ask}.", "Now I need {ask}.", "What remains for this step is {ask}."]
AFTER = ["After that, {rest}.", "Then {rest}.", "Once I have it, {rest}."]
FINAL_HOP = ["That should be the last lookup.", "This is the final hop; its result should answer the question.",
             "If this works, I have the answer."]
ASK_FIRST = ["Let me search for {kw}.", "I'll search for {kw} first.", "Let me run a search on {kw}.",
             "First query: {kw}."]
ASK_NEXT = ["Let me search for {ask}.", "I'll look up {ask}.", "Let me find {ask}.", "Searching for {ask} now."]
STRONG = ["{n} looks like the strongest candidate: {known}, and I think also {wrong}.",
          "My first guess is {n} — {known}, and if I remember right, {wrong}.",
          "{n} seems to fit best so far: {known}, and probably {wrong} as well."]
MORE = ["Further down, the page adds: \"{x}\" Not relevant to the question.",
        "The rest of that page is mostly background (\"{x}\"), nothing I need.",
        "The page goes on at length — \"{x}\" — but the lead paragraph is what matters here.",
        "There is more on the page, e.g. \"{x}\", which I can ignore."]
