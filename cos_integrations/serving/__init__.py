"""Serving: answering questions from summaries in front of the source.

``index`` (:class:`~cos_integrations.serving.index.CoSIndex`: summaries and source chunks
in Chroma, linked), ``hit_rule`` (:class:`~cos_integrations.serving.hit_rule.HitRule`: when
a summary answers), ``retrieval`` (:class:`~cos_integrations.serving.retrieval.FallbackRetriever`:
route, decide, answer or fall back and queue), ``refine`` (the refinement round a miss
queues), ``oversight`` (review, revert, accept), ``stats`` (cache statistics),
``export`` (``llms.txt`` from the summaries). Public names are importable from
:mod:`cos_integrations`.
"""
