"""DR-Synth: (reasoning, query, positive, hard-negative) tuples from QA datasets and agent traces,
plus the embedded synthetic world used as the default data."""
