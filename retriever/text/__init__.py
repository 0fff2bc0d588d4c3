"""Text rules shared by DR-Synth and the audits: the normal form (``normal_form.py``), answer matching
(``answers.py``) and word shingles with their Jaccard (``shingles.py``). Pure Python; imports nothing else of
Hopscotch, so every layer above may use it."""
