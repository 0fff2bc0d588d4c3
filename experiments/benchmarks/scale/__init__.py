"""The cost-curve benchmark (``scripts/bench_scale.py``): BM25, dense Flat, IVF-PQ and multi-vector indexes built and
searched at several corpus sizes, beside ``hopscotch index --plan``'s predictions.

* :mod:`.run`: the stages of every size, resumable, and the plan checks;
* :mod:`.data`: the corpus of real sentences, the queries, the encoders and the IVF spec;
* :mod:`.stages`: one stage, in a process of its own (``python -m hopscotch_experiments.benchmarks.scale.stages``);
  BM25's stages and section: :mod:`.bm25`;
* :mod:`.exact`: the exact MaxSim reference of the multi-vector search;
* :mod:`.report`: the section of ``docs/scaling.md`` and its plot.
"""
