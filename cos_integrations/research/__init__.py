"""Research code, apart from the runtime core: the evaluation harness behind ``cos eval``
(:mod:`.evaluation`: CoS against its baselines, and the retriever against plain chunk RAG)
and the paper authors' own procedure as a baseline (:mod:`.reference`). Nothing in the
runtime (ingest, retrieval, refinement, the frameworks) imports this package.

Example:
    >>> from cos_integrations.research.evaluation import load_dataset   # doctest: +SKIP
    >>> docs = load_dataset("squad-v1.1-dev-chunks.jsonl", limit=5)    # doctest: +SKIP
"""
