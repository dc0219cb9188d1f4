"""The frameworks' own summary retrievers as ``cos eval`` peers (LlamaIndex's
``DocumentSummaryIndex`` and RAPTOR, LangChain's ``MultiVectorRetriever`` and
``ParentDocumentRetriever``), each built over the same documents and answered with the
same answer call as ``rag``.

Examples:
    >>> from cos_integrations.research.peers import PEERS
    >>> "raptor" in PEERS
    True
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from cos_integrations.model import ChatModel
from cos_integrations.research.answer_cache import AnswerCache
from cos_integrations.research.datasets import EvalDoc, EvalQA
from cos_integrations.research.peers import (
    CallRecord,
    PeerDoc,
    PeerSetup,
    PeerUnavailable,
    load_peer,
)
from cos_integrations.research.reporting import aggregate, ingest_costs
from cos_integrations.research.retrieval_eval import answer_row, usage_fields
from cos_integrations.summarize.config import CoSConfig
from cos_integrations.text import estimate_tokens

__all__ = ["peer_rows"]

log = logging.getLogger(__name__)


async def _peer_eval(
    name: str,
    setup: PeerSetup,
    docs: list[EvalDoc],
    test_of: Callable[[EvalDoc], list[EvalQA]],
    answer: AnswerCache,
    done: dict[tuple[str, str], dict],
    write: Callable[[dict], Any],
) -> None:
    """One peer (:mod:`.peers`) over ``docs``: built once (its model calls, tokens and
    seconds charged to every document's record as the mean a document), then each test
    question answered from what it retrieves with the same answer call as every method."""
    todo = [d for d in docs if d.qas and (d.doc_id, name) not in done]
    if not todo:
        return
    peer = load_peer(name, setup)
    before = setup.meter.snapshot()
    record = setup.record
    replayed = record.replayed_seconds if record else 0.0
    start = time.perf_counter()
    await peer.abuild([PeerDoc(d.doc_id, d.title, d.text) for d in docs])
    seconds = time.perf_counter() - start
    if record:  # replayed calls (a resumed build) cost what they took when made
        seconds += record.replayed_seconds - replayed
    spent = setup.meter.snapshot()
    n = len(docs)
    cost = {
        "seconds": seconds / n,
        "calls": (spent.calls - before.calls) / n,
        "prompt_tokens": (spent.prompt_tokens - before.prompt_tokens) / n,
        "completion_tokens": (spent.completion_tokens - before.completion_tokens) / n,
    }
    for doc in todo:
        rows = []
        for q in test_of(doc):
            items = await peer.aretrieve(q.question)
            ans, usage = await answer(q, items)
            rows.append(
                answer_row(
                    q,
                    ans,
                    context_tokens=sum(estimate_tokens(h.text) for h in items),
                    docs=list(dict.fromkeys(h.doc_id for h in items if h.doc_id)),
                    **usage_fields(usage),
                )
            )
        write({"doc_id": doc.doc_id, "method": name, "questions": rows, **aggregate(rows), **cost})


def _test_questions(doc: EvalDoc, split: bool) -> list[EvalQA]:
    """The questions every retrieval method is scored on: the second half when ``split``."""
    qas = doc.qas
    return qas[len(qas) // 2 :] if split and len(qas) >= 2 else qas


async def peer_rows(
    llm: ChatModel,
    peers: list[str],
    docs: list[EvalDoc],
    everything: list[EvalDoc],
    config: CoSConfig,
    k: int,
    split: bool,
    answers: AnswerCache,
    run_log: Any,
) -> dict[str, dict[str, Any]]:
    """Each peer over every document, asked the questioned ones; its ingest costs by name.
    A missing peer package stops the run (say how to install it); another failure is
    logged and the other peers go on."""
    from cos_integrations.embedded.embeddings import LocalEmbedder

    # the peers' build calls, kept beside the run's records: a stopped build resumes
    record = CallRecord(run_log.out.with_suffix(run_log.out.suffix + ".peer-calls.jsonl"))
    setup = PeerSetup(
        llm=llm, embedder=LocalEmbedder(), k=k, context_window=config.context_tokens, record=record
    )
    ingest: dict[str, dict[str, Any]] = {}
    for name in peers:
        try:
            await _peer_eval(
                name,
                setup,
                everything,
                lambda d: _test_questions(d, split),
                answers,
                run_log.done,
                run_log.write,
            )
        except PeerUnavailable:
            raise  # nothing of it can run: say how to install it
        except Exception as exc:  # one peer's failure must not lose the others
            log.warning("peer %s failed: %s", name, exc)
            run_log.failed("*", name, f"{type(exc).__name__}: {exc}")
            continue
        ingest[name] = ingest_costs([run_log.done[(d.doc_id, name)] for d in docs])
    return ingest
