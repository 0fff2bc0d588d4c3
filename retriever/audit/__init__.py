"""Audits no retriever toolkit runs (``hopscotch audit <kind>``): each checks one silent failure of training or
evaluating retrievers for agents and writes a JSON report plus a one-screen summary
(:mod:`hopscotch.retriever.audit.report`).

* ``contamination``: training data against evaluation queries, answers and qrel documents (exact, MinHash
  near-duplicates, answer strings, shared evidence);
* ``false-negatives``: mined hard negatives that are really positives, judged by rules independent of the oracle;
* ``near-duplicates``: MinHash-LSH duplicate groups of a corpus in cmass's format;
* ``ann-fidelity``: an index's recall against exact search on the real query embeddings;
* ``model``: golden vectors of a saved model re-encoded by Hopscotch, sentence-transformers and a service;
* ``perturbation``: search with the reasoning dropped, truncated, shuffled or swapped: does the model use it?
"""
