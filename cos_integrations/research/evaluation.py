"""Evaluation: CoS against its baselines on real human-written QA data (``cos eval``).

Refinement and validation use synthetic questions only (as in the paper); the dataset's
human questions are the held-out test set. Every method's summary is tested by answering
the held-out questions from it alone, with the same model, all in one call per document;
``content`` answers from the full document. ``fallback`` answers each held-out question
through the fallback retrieval path over an index of the CoS summaries.

Results per document are appended to ``OUT.docs.jsonl`` as they finish; a re-run skips
what is there (resumable). See :func:`run_eval` and ``cos eval --help``. The parts live
by concern: :mod:`.datasets`, :mod:`.summary_eval` and :mod:`.retrieval_eval` (the
methods), :mod:`.streams` and :mod:`.stream_eval` (recurring traffic), :mod:`.reporting`;
this module runs them and re-exports what callers import.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cos_integrations.model import ChatModel
from cos_integrations.research.answer_cache import AnswerCache, digest
from cos_integrations.research.datasets import DatasetError, EvalDoc, EvalQA, load_dataset
from cos_integrations.research.framework_eval import FRAMEWORK_ROWS
from cos_integrations.research.jsonl import append_jsonl, read_jsonl
from cos_integrations.research.peer_eval import peer_rows
from cos_integrations.research.peers import (
    PEERS,
)
from cos_integrations.research.reporting import (
    ABLATION_COLUMNS,
    RETRIEVAL_COLUMNS,
    ablation_table,
    ingest_costs,
    plot,
    repeat_stats,
    retrieval_table,
    summary_table,
)
from cos_integrations.research.retrieval_eval import (
    RETRIEVAL_METHODS,
    RetrievalEvalOptions,
    eval_index,
    is_retrieval,
    retrieval_rows,
)
from cos_integrations.research.stream_eval import run_stream
from cos_integrations.research.summary_eval import (
    SUMMARY_EVAL_METHODS,
    SUMMARY_METHODS,
    iteration_record,
    recorded_summaries,
    summary_jobs,
)
from cos_integrations.research.traffic_eval import PARAPHRASE_PROMPT, paraphrase
from cos_integrations.summarize.config import CoSConfig

__all__ = [
    "EvalDoc",
    "EvalQA",
    "load_dataset",
    "run_eval",
    "METHODS",
    "DatasetError",
    "RetrievalEvalOptions",
    "RETRIEVAL_COLUMNS",
    "RETRIEVAL_METHODS",
    "retrieval_table",
    "ABLATION_COLUMNS",
    "ablation_table",
    "ingest_costs",
    "iteration_record",
    "PARAPHRASE_PROMPT",
    "paraphrase",
    "plot",
    "repeat_stats",
    "is_retrieval",
]

log = logging.getLogger(__name__)

# every method cos eval runs: the summary methods, then the retrieval methods and peers
METHODS = (*SUMMARY_EVAL_METHODS, *RETRIEVAL_METHODS)


async def run_eval(
    llm: ChatModel,
    docs: list[EvalDoc],
    *,
    methods: Sequence[str],
    config: CoSConfig,
    out: Path,
    model_name: str,
    dataset: str,
    concurrency: int = 1,
    refine_from_traffic: bool = False,
    retrieval: RetrievalEvalOptions | None = None,
    answer_cache: Path | None = None,
    on_record: Callable[[dict], None] | None = None,
    oracle: bool = True,
    distractors: Sequence[EvalDoc] = (),
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Run every method on every document (resuming from ``OUT.docs.jsonl``) and write OUT.

    A method that fails on a document (model error, context overflow) is listed under
    ``"errors"`` and left out of the means; the other documents go on, and a re-run retries
    only what failed or is missing. The retrieval methods (``fallback``, ``rag``,
    ``right-doc``) share one index in ``OUT.index/`` built from the summaries of
    ``retrieval.summary_method`` (computed in this run, or read from
    ``retrieval.summaries_from``). ``answer_cache`` (a JSONL file) keeps every retrieval
    answer by its exact prompt, so a later run that asks the same question over the same
    context (another hit rule over the same chunks) reuses the call instead of repeating it.
    ``distractors`` are indexed beside ``docs`` (their summaries made by the retrieval's
    summary strategies, or read from ``summaries_from``) and never asked about: a
    collection of real size in which the questioned documents must still be found.
    """
    retrieval = retrieval or RetrievalEvalOptions()
    peers, wanted, plain, sources = _plan(methods, retrieval)
    run_log = _RunLog(out, model_name, config, retrieval, refine_from_traffic, on_record)
    jobs = [(m, d) for d in docs for m in plain]
    jobs += [(m, d) for d in distractors for m in plain if m in sources]
    await summary_jobs(llm, jobs, config, oracle, concurrency, run_log)
    everything = [*docs, *distractors]
    ingest: dict[str, dict[str, Any]] = {}
    if retrieval.stream is not None:
        return await _stream(
            llm,
            docs,
            everything,
            methods,
            config,
            retrieval,
            out,
            model_name,
            dataset,
            answer_cache,
            run_log,
            on_progress,
        )
    for i, source in enumerate(sources):
        summaries = recorded_summaries(source, retrieval.summaries_from, run_log.done, everything)
        # what the questioned documents' summaries cost (distractors may be cheaper)
        ingest[retrieval.label(source)] = ingest_costs(
            [summaries[d.doc_id] for d in docs if d.doc_id in summaries]
        )
        # rag, rag-focused and right-doc read only the chunks, the same in every index
        index_dir = run_log.index_dir(source if len(sources) > 1 else None)
        await retrieval_rows(
            llm,
            everything,
            summaries,
            config,
            [m for m in wanted if i == 0 or m == "fallback"],
            refine_from_traffic,
            retrieval,
            index_dir,
            run_log.done,
            run_log.write,
            model_name,
            answer_cache,
            label=retrieval.label(source),
        )
    if peers:
        split = retrieval.test_half or refine_from_traffic
        cache = AnswerCache(llm, model_name, answer_cache)
        ingest.update(
            await peer_rows(
                llm, peers, docs, everything, config, retrieval.k, split, cache, run_log
            )
        )
    result = {
        "model": model_name,
        "dataset": dataset,
        "docs": len(docs),
        "distractors": len(distractors),
        "config": config.model_dump(mode="json"),
        "retrieval": retrieval.model_dump(mode="json") if wanted else None,
        "methods": summary_table(run_log.done, docs, set(methods), ingest),
        "errors": run_log.errors,
    }
    out.write_text(json.dumps(result, indent=2))
    return result


async def _stream(
    llm: ChatModel,
    docs: list[EvalDoc],
    everything: list[EvalDoc],
    methods: Sequence[str],
    config: CoSConfig,
    retrieval: RetrievalEvalOptions,
    out: Path,
    model_name: str,
    dataset: str,
    answer_cache: Path | None,
    run_log: _RunLog,
    on_progress: Callable[[str, int, int], None] | None,
) -> dict[str, Any]:
    """``retrieval.stream``: the stream's rows over one collection (its first summary
    strategy's summaries), written to OUT."""
    source = retrieval.sources[0]
    summaries = recorded_summaries(source, retrieval.summaries_from, run_log.done, everything)

    def make_index(path: Path) -> Any:
        return eval_index(path, everything, summaries, config, retrieval, False)

    stream = await run_stream(
        llm,
        docs,
        everything,
        summaries,
        config=config,
        retrieval=retrieval,
        options=retrieval.stream,  # type: ignore[arg-type]
        out=out,
        model_name=model_name,
        answer_cache=answer_cache,
        methods=methods,
        make_index=make_index,
        on_ask=on_progress,
    )
    result = {
        "model": model_name,
        "dataset": dataset,
        "docs": len(docs),
        "distractors": len(everything) - len(docs),
        "config": config.model_dump(mode="json"),
        "retrieval": retrieval.model_dump(mode="json"),
        "stream": stream,
        "methods": {},
        "errors": run_log.errors,
    }
    out.write_text(json.dumps(result, indent=2))
    return result


def _plan(
    methods: Sequence[str], retrieval: RetrievalEvalOptions
) -> tuple[list[str], list[str], list[str], list[str]]:
    """What a run does: the peers, our retrieval methods, the summary methods to compute
    (those asked for, and those the retrieval index is built from unless read from a
    file), and the summary strategies the retrieval indexes are built from."""
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}; choose from {METHODS}")
    framework = [m for m in methods if m in FRAMEWORK_ROWS]
    if framework and retrieval.stream is None:
        raise ValueError(
            f"{', '.join(framework)} run on a stream of asks (--stream N): a framework row "
            "is the product's stream through that framework's query engine or chain"
        )
    peers = [m for m in methods if m in PEERS]
    wanted = [m for m in methods if m in RETRIEVAL_METHODS and m not in PEERS]
    plain = [m for m in methods if m not in RETRIEVAL_METHODS]
    sources = retrieval.sources if wanted else []
    for source in sources:
        if retrieval.summaries_from is None and source not in plain:
            if source not in SUMMARY_METHODS and source != "reference":
                raise ValueError(f"summary_method {source!r} is not a summary method")
            plain.append(source)  # the retrieval index is built from these summaries
    return peers, wanted, plain, sources


# Options added after runs were recorded, with the value every run had before they
# existed. Both act only on refinement from traffic (retarget is a refine job's), so a
# signature leaves them out of a run without it, and out of one with it while they hold
# that old value: the records of before still resume, whatever the defaults become.
_LATER_OPTIONS: dict[tuple[str, ...], Any] = {
    ("retrieval", "refine_retarget"): 1,
    ("retrieval", "refine_check_names"): False,
}


def _comparable(signature: dict[str, Any] | None) -> dict[str, Any] | None:
    """A copy of ``signature`` without the later options that cannot have changed its run.

    Examples:
        >>> _comparable({"retrieval": {"k": 2, "refine_retarget": 3}})
        {'retrieval': {'k': 2}}
        >>> _comparable({"retrieval": {"refine_retarget": 3}, "refine_from_traffic": True})
        {'retrieval': {'refine_retarget': 3}, 'refine_from_traffic': True}
    """
    if not signature:
        return signature
    sig = json.loads(json.dumps(signature))
    traffic = bool(sig.get("refine_from_traffic"))
    for (*parents, leaf), before in _LATER_OPTIONS.items():
        node: Any = sig
        for key in parents:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf in node and (not traffic or node[leaf] == before):
            del node[leaf]
    return sig


class _RunLog:
    """A run's records by ``(doc_id, method)``: read back from ``OUT.docs.jsonl`` when their
    signature matches (the model and config; for the retrieval methods also how they ran),
    appended as they finish, so a re-run does only what is missing or failed."""

    def __init__(
        self,
        out: Path,
        model_name: str,
        config: CoSConfig,
        retrieval: RetrievalEvalOptions,
        refine_from_traffic: bool,
        on_record: Callable[[dict], None] | None,
    ) -> None:
        self.out, self.on_record = out, on_record
        self.partial = out.with_suffix(out.suffix + ".docs.jsonl")
        self.signature = {"model": model_name, "config_hash": config.config_hash()}
        # the retrieval methods' figures depend on how they were run, and on the summaries
        # (the routing check on, as every run before the option had it, is left out)
        dumped = retrieval.model_dump(
            mode="json", exclude={"routing_check"} if retrieval.routing_check else None
        )
        r_signature = {**self.signature, "retrieval": dumped}
        if refine_from_traffic:
            r_signature["refine_from_traffic"] = True
        self.r_signature = _comparable(r_signature) or r_signature
        self.done: dict[tuple[str, str], dict] = {}
        self.errors: list[dict[str, str]] = []
        for rec in read_jsonl(self.partial):
            if _comparable(rec.get("signature")) == self._signature_of(rec["method"]):
                self.done[(rec["doc_id"], rec["method"])] = rec

    def _signature_of(self, method: str) -> dict:
        return self.r_signature if is_retrieval(method) else self.signature

    def write(self, rec: dict) -> None:
        rec["signature"] = self._signature_of(rec["method"])
        append_jsonl(self.partial, rec)
        self.done[(rec["doc_id"], rec["method"])] = rec
        if self.on_record:
            self.on_record(rec)

    def failed(self, doc_id: str, method: str, error: str) -> None:
        self.errors.append({"doc_id": doc_id, "method": method, "error": error})

    def index_dir(self, strategy: str | None) -> Path:
        """One index per retrieval signature (and strategy): another starts afresh."""
        name = f"{self.out.name}.index-{digest(self.r_signature)}"
        return self.out.with_name(name if strategy is None else f"{name}-{strategy}")
