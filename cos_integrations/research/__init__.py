"""Research code, apart from the runtime core: the evaluation harness behind ``cos eval``
(:mod:`.evaluation`: CoS against its baselines, and the retriever against plain chunk RAG)
and the paper authors' own procedure as a baseline (:mod:`.reference`). Nothing in the
runtime (ingest, retrieval, refinement, the frameworks) imports this package.

The answer metrics (SQuAD F1 and exact match, ROUGE-L, the answer normalisation, per
language) are here too.

Examples:
    >>> from cos_integrations.research import squad_f1
    >>> squad_f1("der Rhein", ["Rhein"], "de")
    1.0
    >>> from cos_integrations.research.evaluation import load_dataset   # doctest: +SKIP
    >>> docs = load_dataset("squad-v1.1-dev-chunks.jsonl", limit=5)    # doctest: +SKIP
"""

from cos_integrations.metrics import exact_match, normalize_answer, rouge_l, squad_f1

__all__ = ["exact_match", "normalize_answer", "rouge_l", "squad_f1"]
