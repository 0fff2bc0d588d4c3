"""The searchers' argparse adapter: the one edge where parsed command-line flags (an :class:`argparse.Namespace`,
from ``hopscotch search`` / ``serve`` / ``replay`` or a harness's own parser) become searchers. Below it the library
takes options, not namespaces.

* :mod:`.flags`: declaring a backend's flags in a parser (:func:`~.flags.add_option`) and reading their values
  (:func:`~.flags.flag`, :func:`~.flags.given_flags`, :class:`~.flags.FlagValues`); the searcher interface and every
  backend import only its declaring half and :class:`~.flags.FlagValues`.
* :mod:`.namespace`: one backend from a parsed namespace: :func:`~.namespace.searcher_from_namespace` (the one place
  flags become a reranked searcher; ``SearcherClass(args)`` / ``SearcherClass(reranker, args)`` (BrowseComp-Plus's
  registry, AgentIR) and ``SearcherClass.from_args(args)`` reach it through the harness edge's metaclass,
  :class:`~hopscotch.retriever.searchers.harness.HarnessConstructor`: no backend module imports this)
  and the rerank stage's options (:func:`~.namespace.rerank_options`).
* :mod:`.build`: :func:`~.build.searcher_from_args` (the commands: the backend the flags select), the refusal of a
  flag the selected backend does not use (:func:`~.build.refuse_unused_flags`), the hybrid's fusion from parsed flags
  (:func:`~.build.fusion_from_args`) and :func:`~.build.build_searcher`, the Python factory.
"""
