"""Shared pieces of the benchmark and GPU-check scripts of ``scripts/`` (``bench_*.py``, ``gpu_check*.py``).

The scripts stay thin and never import one another; what two of them share lives here:

* :mod:`.common`: the flags every whole-process benchmark takes, child processes timed and their JSON
  result read, peak RSS, bytes on disk, Markdown rows and tables, the shared data folder;
* :mod:`.vectors`: the clustered unit vectors of ``bench_index.py`` and the GPU check's FAISS section;
* :mod:`.gpu_check`: rows, deadlines and device helpers of ``scripts/gpu_check.py`` and its sections, and
  the entry point each section script runs (:func:`.gpu_check.section_main`);
* :mod:`.scale` (``scripts/bench_scale.py``): measured cost curves of BM25, Flat, IVF-PQ and multi-vector
  indexes across corpus sizes beside ``index --plan``: its runner and plan checks (:mod:`.scale.run`), corpus and
  encoders (:mod:`.scale.data`), stages (:mod:`.scale.stages`, one process each; BM25's: :mod:`.scale.bm25`),
  exact MaxSim reference (:mod:`.scale.exact`) and report (:mod:`.scale.report`: the section of
  ``docs/scaling.md`` and its plot).

The kernel bench and check are :mod:`hopscotch_experiments.kernel_checks.bench`; recall@k of an ANN search is
:mod:`hopscotch.retriever.evaluation.ann_recall`.

The top layer of ``hopscotch_experiments`` (tests/test_architecture.py): a benchmark may drive anything,
nothing in ``hopscotch`` imports a benchmark.
"""
