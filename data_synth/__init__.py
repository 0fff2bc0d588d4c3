"""DR-Synth: (reasoning, query, positive, hard-negative) tuples from QA datasets and agent traces,
plus the embedded synthetic world used as the default data."""

# DR-Synth entry points, imported lazily so that ``import data_synth.world`` stays light.
_EXPORTS = {"synthesize": "data_synth.pipeline", "SynthConfig": "data_synth.config",
            "read_traces": "data_synth.traces", "TraceStep": "data_synth.traces", "load_qa": "data_synth.qa"}


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'data_synth' has no attribute {name!r}")


__all__ = sorted(_EXPORTS)
