"""The experiments behind docs/benchmarks.md, driven by the thin scripts of ``scripts/``.

Above the whole of ``hopscotch`` (the ablations run ``hopscotch index / search / tune-fusion`` in-process
through :func:`hopscotch.retriever.cli.main`) and above :mod:`hopscotch_experiments.agent_data` (their dev sets):

* :mod:`.ablation_runs`: cached indexes and runs under a work folder, fused and late-fusion runs, nDCG@10;
* :mod:`.agent_ablation`: the agent-retrieval ablation (issues 9, 22) and its acceptance checks;
* :mod:`.ablation_report`: its markdown table, the marked docs sections, the plot;
* :mod:`.multivector_ablation`: late interaction on the agent dev sets (issue 23);
* :mod:`.wise_ft`: choosing ``train.wise_ft_alpha`` (issue 9);
* :mod:`.fusion_defaults`: the maximin fusion defaults (issue 22);
* :mod:`.late_fusion_gate`: late fusion by reasoning length (issue 9);
* :mod:`.train_quality`: the trainer's quality check on HotpotQA/IRCoT;
* :mod:`.st_peer`: the sentence-transformers multi-vector peer.
"""
