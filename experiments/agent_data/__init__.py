"""The data of the agent-retrieval experiments (issues 9 and 26), built from the shared data folder.

* :mod:`.splits`: the train / dev / test questions of every source (one definition; training never sees a
  dev or test question), the embedded worlds' sizes, and the train trajectories left out by audit.
* :mod:`.musique_hops`: MuSiQue's sub-question decompositions as agent steps, one per hop (the one
  conversion both the training traces and the evaluation set use).
* :mod:`.training_traces`: the generic trace files of the train questions (``scripts/agent_data.py``).
* :mod:`.eval_sets`: the held-out evaluation sets of the agent ablation (``scripts/agent_eval_sets.py``).

The scripts in ``scripts/`` are thin drivers of these modules.
"""
