"""Hopscotch's experiments: the code behind the tables of ``docs/*.md``, outside the installed package.

A distribution of its own (``experiments/pyproject.toml``, installed by ``scripts/setup.sh``) that imports
``hopscotch`` like any user; nothing in ``hopscotch`` imports it. Its drivers are the scripts of ``scripts/``.

* :mod:`.agent_data`: the agent experiments' data (splits of whole questions, training traces, dev sets);
* :mod:`.kernel_checks`: the kernel test harness (accuracy sweeps against float64, the kernel bench,
  the compile report);
* :mod:`.ablations`: our ablations (they drive the ``hopscotch`` CLI in-process and write docs sections);
* :mod:`.benchmarks`: what the benchmark and GPU-check scripts share.

Layers, bottom first (``tests/test_architecture.py``): ``agent_data``, ``kernel_checks`` < ``ablations``
< ``benchmarks``.
"""
