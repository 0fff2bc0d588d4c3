"""The phrase banks of long mode's agent thinking (restating, hypotheses, reading results, dead ends,
self-corrections, planning), in the voice of deep-research agents; :mod:`hopscotch.data_synth.world.long_traces`
fills them in."""

from __future__ import annotations

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
