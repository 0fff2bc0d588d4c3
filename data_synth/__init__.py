"""DR-Synth: (reasoning, query, positive, hard-negative) tuples from QA datasets and agent traces,
plus the embedded synthetic world used as the default data."""
import importlib

# DR-Synth entry points, imported lazily so that ``import hopscotch.data_synth.world`` stays light.
_EXPORTS = {"synthesize": "hopscotch.data_synth.pipeline", "SynthInputs": "hopscotch.data_synth.pipeline",
            "SynthConfig": "hopscotch.data_synth.config", "read_traces": "hopscotch.data_synth.traces",
            "TraceStep": "hopscotch.data_synth.trace_step", "load_qa": "hopscotch.data_synth.qa"}


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["SynthConfig", "SynthInputs", "TraceStep", "load_qa", "read_traces", "synthesize"]
