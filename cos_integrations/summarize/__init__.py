"""Summarising: the Chain of Summaries loop and what it is made of.

``engine`` (:class:`~cos_integrations.summarize.engine.ChainOfSummaries`: thesis, question
bank, answer check, synthesis, best iteration), ``prompts`` (every prompt, versioned),
``questions`` (synthetic Q/A pairs and answer parsing), ``config`` (``CoSConfig`` and its
presets), ``guard`` (faithfulness and injection checks before publishing), ``result``
(what a run returns). Public names are importable from :mod:`cos_integrations`.
"""
