"""The embedded world: a seeded synthetic knowledge graph, its documents, multi-hop questions and traces.

It is the default data on a fresh machine (no downloads). ``build_world(seed, docs, questions)`` makes:

* typed entities (people, companies, films, cities, universities, countries) with attributes and functional
  relations between them (:mod:`~hopscotch.data_synth.world.graph`);
* one or two prose documents per entity, each fact rendered by one of several templates
  (:mod:`~hopscotch.data_synth.world.documents`);
* multi-hop questions (2-4 steps) made by random walks, each with exactly one answer over the graph, and a
  scripted agent trace per question (:mod:`~hopscotch.data_synth.world.questions`).

``write_world(world, out)`` writes a BEIR folder plus ``traces.jsonl`` (:mod:`~hopscotch.data_synth.world.build`).
``build_long_world`` makes the long-reasoning version (multi-section pages, 300-3,000-word agent thinking, keyword
queries; same questions and gold): :mod:`~hopscotch.data_synth.world.long`.
"""

from hopscotch.data_synth.world.build import World, build_world, write_world
from hopscotch.data_synth.world.graph import ATTRIBUTE_QUESTIONS, RELATIONS, Entity
from hopscotch.data_synth.world.long import build_long_world, lengthen_world

__all__ = ["ATTRIBUTE_QUESTIONS", "RELATIONS", "Entity", "World", "build_long_world", "build_world", "lengthen_world",
           "write_world"]
