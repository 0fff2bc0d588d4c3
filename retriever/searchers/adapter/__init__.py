"""The searchers' argparse adapter: the one edge where parsed command-line flags (an :class:`argparse.Namespace`,
from ``hopscotch search`` / ``serve`` / ``replay`` or a harness's own parser) become searchers. Below it the library
takes options, not namespaces.

* :mod:`.flags`: declaring a backend's flags in a parser (:func:`~.flags.add_option`) and reading their values
  (:func:`~.flags.flag`, :func:`~.flags.given_flags`); imported by the searcher interface and every backend.
* :mod:`.build`: ``SearcherClass(args)`` / ``SearcherClass(reranker, args)`` (BrowseComp-Plus's registry, AgentIR;
  the :class:`~.build.BuiltFromNamespace` metaclass of the registered backends), :func:`~.build.searcher_from_args`
  (the commands), the refusal of a flag the selected backend does not use (:func:`~.build.refuse_unused_flags`),
  the rerank stage's options (:func:`~.build.rerank_options`) and :func:`~.build.build_searcher`, the Python
  factory.
"""
