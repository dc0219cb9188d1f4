"""The first table of BENCHMARKS.md from the records of ``benchmarks/four_sets.sh`` (no model
calls): per kind of text, each method's F1 (normalised for the text's language, as MLQA's
script does), prompt tokens a question, and for the product its hit rate, wrong hits (F1 <
0.5) among its hits (in brackets: those that rag, reading the source chunks, answers right,
F1 >= 0.5: the answers a hit loses), its hits' F1 against rag's on the same questions, and
paired by question against rag-ordered and rag (better / worse). ``--against TAG`` pairs one
run's fallback with another's (the hit rule before and after a change). ``--traffic`` reads
a run with ``EXTRA="--refine-from-traffic --repeat-traffic"`` instead: per kind of text, the
refine jobs' outcomes, the repeated traffic (every traffic question's F1 asked again against
its first ask, paired; of the misses whose answer is in the source, how many hit when asked
again) and the unseen test questions before and after refinement. ``--peers`` reads a run
with the frameworks' own retrievers among its methods (``METHODS=...,parent-doc,raptor``):
per kind of text, every method's F1, prompt tokens a question, how often the question's
document was in what the model read, what ingest cost a document (model calls, tokens),
and the product paired against each method by question. ``--pair TAG`` compares the
fallback rows of two runs alone (a run with ``METHODS=fallback``): F1, prompt tokens, hit
rate and wrong hits of each, paired by question. ``--chunks-from TAG`` prints the first
table for such a run, its ``rag`` and ``rag-ordered`` rows read from the run named (the same
questions and chunks).

    python benchmarks/four_sets_table.py [--tag four] [--against base] [--sets squad,...]
    python benchmarks/four_sets_table.py --tag peers --peers
    python benchmarks/four_sets_table.py --tag k4 --pair four     # fallback rows alone
    python benchmarks/four_sets_table.py --tag scorechunk --chunks-from four --against score
    python benchmarks/four_sets_table.py --tag refine --traffic
    python benchmarks/four_sets_table.py --tag noam --traffic --traffic-against refine
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from cos_integrations.metrics import squad_f1
from cos_integrations.research.jsonl import read_jsonl

RESULTS = Path(__file__).parent / "results"
# a refine job rejected by the grounding checks: "... (in_quote, in_source failed)"
GROUNDING_FAILED = re.compile(r"\((?:\w+, )*\w+ failed\)")
KINDS = {
    "squad": "encyclopedia (SQuAD chunks)",
    "covid": "scientific papers (COVID-QA)",
    "fairy": "stories (FairytaleQA)",
    "german": "German (XQuAD de)",
}
# the second slice of each set (four_sets.sh), never run while the hit path was chosen:
# --sets squad2,covid2,fairy2,german2
SECOND_SLICE = {
    "squad2": "encyclopedia, second slice",
    "covid2": "scientific papers, second slice",
    "fairy2": "stories, second slice",
    "german2": "German, second slice",
}
LABELS = {**KINDS, **SECOND_SLICE}


def languages(dataset: str) -> dict[str, str]:
    """Each document's language in one set's slice (``en`` when the line names none)."""
    out = {}
    with (RESULTS / "sets" / f"{dataset}.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            out[doc["doc_id"]] = doc.get("language", "en")
    return out


def rows(tag: str, dataset: str) -> dict[str, dict[tuple[str, str], dict]]:
    """Every question's row by method, keyed by (document, question), F1 recomputed in the
    document's language."""
    language = languages(dataset)
    out: dict[str, dict[tuple[str, str], dict]] = {}
    for rec in read_jsonl(RESULTS / f"{tag}-{dataset}.json.docs.jsonl"):
        if "questions" not in rec or rec.get("error"):
            continue
        lang = language.get(rec["doc_id"], "en")
        for q in rec["questions"]:
            q = {**q, "f1": squad_f1(q.get("answer") or "", q["gold"], lang)}
            out.setdefault(rec["method"], {})[(rec["doc_id"], q["question"])] = q
    return out


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def paired(a: dict, b: dict) -> str:
    keys = a.keys() & b.keys()
    better = sum(a[k]["f1"] > b[k]["f1"] + 1e-9 for k in keys)
    worse = sum(a[k]["f1"] < b[k]["f1"] - 1e-9 for k in keys)
    return f"{better} / {worse}"


def row(cells: list[str]) -> None:
    """One line of a Markdown table."""
    print("| " + " | ".join(cells) + " |")


def header(head: list[str]) -> None:
    """A Markdown table's first two lines."""
    row(head)
    print("|" + "---|" * len(head))


def table(tag: str, sets: list[str], against: str | None, chunks_from: str | None = None) -> None:
    head = [
        "text",
        "questions",
        "fallback F1",
        "rag-ordered F1",
        "rag F1",
        "prompt tokens (fallback / rag)",
        "hit rate",
        "wrong hits (rag right on them)",
        "hits' F1 / rag's on them",
        "fallback vs rag-ordered, vs rag (better / worse)",
    ]
    if against:
        head.append(f"fallback vs {against}'s (better / worse; its F1)")
    header(head)
    for dataset in sets:
        runs = rows(tag, dataset)
        chunks = rows(chunks_from, dataset) if chunks_from else runs
        fb, rag, ordered = runs["fallback"], chunks["rag"], chunks["rag-ordered"]
        hits = [k for k, q in fb.items() if q.get("hit")]
        wrong = [k for k in hits if fb[k]["f1"] < 0.5]
        lost = sum(k in rag and rag[k]["f1"] >= 0.5 for k in wrong)
        tokens = mean([q.get("prompt_tokens", 0) for q in fb.values()])
        rag_tokens = mean([q.get("prompt_tokens", 0) for q in rag.values()])
        cells = [
            LABELS.get(dataset, dataset),
            str(len(fb)),
            f"{mean([q['f1'] for q in fb.values()]):.3f}",
            f"{mean([q['f1'] for q in ordered.values()]):.3f}",
            f"{mean([q['f1'] for q in rag.values()]):.3f}",
            f"{tokens:.0f} / {rag_tokens:.0f} ({tokens / rag_tokens:.0%})",
            f"{len(hits) / len(fb):.0%}",
            f"{len(wrong)} of {len(hits)} ({lost})",
            f"{mean([fb[k]['f1'] for k in hits]):.3f} / "
            f"{mean([rag[k]['f1'] for k in hits if k in rag]):.3f}",
            f"{paired(fb, ordered)}, {paired(fb, rag)}",
        ]
        if against:
            old = rows(against, dataset)["fallback"]
            cells.append(f"{paired(fb, old)} ({mean([q['f1'] for q in old.values()]):.3f})")
        row(cells)


PEER_NAMES = {
    "fallback": "**fallback (the product)**",
    "rag-ordered": "rag-ordered (top-2 chunks in document order)",
    "rag": "rag (top-2 chunks)",
    "parent-doc": "LangChain `ParentDocumentRetriever`",
    "raptor": "LlamaIndex RAPTOR pack",
    "doc-summary": "LlamaIndex `DocumentSummaryIndex`",
    "multi-vector": "LangChain `MultiVectorRetriever`",
}


def peers_table(tag: str, sets: list[str]) -> None:
    """Every method of one run side by side, per kind of text (``--peers``)."""
    header(
        [
            "text",
            "method",
            "F1",
            "prompt tokens a question",
            "question's document read",
            "ingest: model calls / tokens a document",
            "fallback vs it (better / worse)",
        ]
    )
    for dataset in sets:
        runs = rows(tag, dataset)
        metrics = json.loads((RESULTS / f"{tag}-{dataset}.json").read_text())["methods"]
        fb = runs["fallback"]
        for method in sorted(runs, key=lambda m: list(PEER_NAMES).index(m)):
            got, m = runs[method], metrics[method]
            ingest = m.get("ingest")
            cells = [
                LABELS.get(dataset, dataset) if method == "fallback" else "",
                PEER_NAMES[method],
                f"{mean([q['f1'] for q in got.values()]):.3f}",
                f"{m['prompt_tokens_per_question']:,.0f}",
                f"{m['right_doc_rate']:.0%}" if "right_doc_rate" in m else "",
                f"{ingest['calls_per_doc']:.1f} / {ingest['tokens_per_doc']:,.0f}"
                if ingest
                else "0 / 0",
                "" if method == "fallback" else paired(fb, got),
            ]
            row(cells)


def pair_table(tag: str, other: str, sets: list[str]) -> None:
    """The fallback rows of two runs side by side (``--pair``)."""
    header(
        [
            "text",
            f"F1: {tag} / {other}",
            f"prompt tokens: {tag} / {other}",
            f"hit rate: {tag} / {other}",
            f"wrong hits: {tag} / {other}",
            f"{tag} vs {other} (better / worse)",
        ]
    )
    for dataset in sets:
        runs = [rows(t, dataset)["fallback"] for t in (tag, other)]
        cells = [LABELS.get(dataset, dataset)]
        for field in ("f1", "prompt_tokens"):
            values = [mean([q.get(field, 0) for q in run.values()]) for run in runs]
            cells.append(" / ".join(f"{v:.3f}" if field == "f1" else f"{v:.0f}" for v in values))
        hits = [[q for q in run.values() if q.get("hit")] for run in runs]
        cells.append(" / ".join(f"{len(h) / len(r):.0%}" for h, r in zip(hits, runs, strict=True)))
        cells.append(" / ".join(f"{sum(q['f1'] < 0.5 for q in h)} of {len(h)}" for h in hits))
        cells.append(paired(*runs))
        row(cells)


def grounded(job: dict) -> bool:
    """Whether a refine job's reading of the source gave an answer that passed the grounding
    checks (the query then joined the document's bank: a repeat can take the answered-miss
    route), read from its recorded outcome: taught, or rejected after the grounding (nothing
    taught, already held, validation dropped), not rejected by it or unreadable."""
    if job["status"] in ("published", "suggested", "conflict"):
        return True
    reason = job.get("reason", "")
    return job["status"] == "rejected" and not (
        GROUNDING_FAILED.search(reason)
        or reason.startswith("unreadable reply")
        or reason in ("document deleted", "no summary yet")
    )


def traffic_rows(tag: str, dataset: str) -> tuple[list, list, list, list, dict[str, int], set[str]]:
    """A refine-from-traffic run's questions, F1 recomputed in the document's language: the
    traffic's first ask and its ask again, the unseen questions before and after, the
    refine jobs' outcomes by status and the queries whose job grounded an answer."""
    language = languages(dataset)
    first, again, before, after, outcomes = [], [], [], [], {}
    found: set[str] = set()
    for rec in read_jsonl(RESULTS / f"{tag}-{dataset}.json.docs.jsonl"):
        if rec.get("method") != "fallback" or "traffic" not in rec:
            continue
        lang = language.get(rec["doc_id"], "en")

        def f1(q: dict, lang: str = lang) -> dict:
            return {**q, "f1": squad_f1(q.get("answer") or "", q["gold"], lang)}

        first += [f1(q) for q in rec["traffic"]]
        again += [f1(q) for q in rec.get("traffic_again", [])]
        before += [f1(q) for q in rec["questions"]]
        after += [f1(q) for q in rec.get("questions_after", [])]
        for job in rec.get("refine", []):
            outcomes[job["status"]] = outcomes.get(job["status"], 0) + 1
            if grounded(job):
                found.add(job["query"])
    return first, again, before, after, outcomes, found


def traffic_against(tag: str, other: str, sets: list[str]) -> None:
    """Two refine-from-traffic runs question by question (a switch on and off): the traffic
    asked again and the unseen questions after refinement, each run's F1 and hits, paired
    (``tag`` better / worse than ``other``)."""
    header(
        [
            "text",
            f"traffic again: F1 {tag} / {other} (paired)",
            "hits again",
            f"unseen after refinement: F1 {tag} / {other} (paired)",
            "hits after",
            "prompt tokens again + after a question",
        ]
    )
    for dataset in sets:
        mine, theirs = traffic_rows(tag, dataset), traffic_rows(other, dataset)
        cells = [LABELS.get(dataset, dataset)]
        for part in (1, 3):
            # by position and question: a question may be asked twice in a set
            a = {(i, q["question"]): q for i, q in enumerate(mine[part])}
            b = {(i, q["question"]): q for i, q in enumerate(theirs[part])}
            cells += [
                f"{mean([q['f1'] for q in a.values()]):.3f} / "
                f"{mean([q['f1'] for q in b.values()]):.3f} ({paired(a, b)})",
                f"{sum(bool(q.get('hit')) for q in a.values())} / "
                f"{sum(bool(q.get('hit')) for q in b.values())}",
            ]
        tokens = [
            mean([q.get("prompt_tokens", 0) for q in run[1] + run[3]]) for run in (mine, theirs)
        ]
        cells.append(f"{tokens[0]:.0f} / {tokens[1]:.0f}")
        row(cells)


def traffic_table(tag: str, sets: list[str], against: str | None) -> None:
    """The refine-from-traffic run's table (see the module docstring)."""
    head = [
        "text",
        "refine jobs (taught / silent / rejected / other)",
        "traffic F1: first ask -> again (paired better / worse)",
        "missed, answer in source: a job grounded it / hit again",
        "their F1: first -> again",
        "unseen questions' F1: before -> after refinement (paired)",
    ]
    if against:
        head.append(f"before vs {against}'s fallback (paired)")
    header(head)
    for dataset in sets:
        first, again, before, after, outcomes, found = traffic_rows(tag, dataset)
        pairs = list(zip(first, again, strict=True))
        better = sum(a["f1"] > b["f1"] + 1e-9 for b, a in pairs)
        worse = sum(a["f1"] < b["f1"] - 1e-9 for b, a in pairs)
        missed = [(b, a) for b, a in pairs if not b["hit"] and b.get("in_source")]
        hit_again = [(b, a) for b, a in missed if a["hit"]]
        tb = {q["question"]: q for q in before}
        ta = {q["question"]: q for q in after}
        keys = tb.keys() & ta.keys()
        t_better = sum(ta[k]["f1"] > tb[k]["f1"] + 1e-9 for k in keys)
        t_worse = sum(ta[k]["f1"] < tb[k]["f1"] - 1e-9 for k in keys)
        taught = outcomes.get("published", 0) + outcomes.get("suggested", 0)
        silent = outcomes.get("not_in_source", 0)
        rejected = outcomes.get("rejected", 0)
        other = sum(outcomes.values()) - taught - silent - rejected
        cells = [
            LABELS.get(dataset, dataset),
            f"{sum(outcomes.values())} ({taught} / {silent} / {rejected} / {other})",
            f"{mean([q['f1'] for q in first]):.3f} -> {mean([q['f1'] for q in again]):.3f} "
            f"({better} / {worse})",
            f"{sum(b['question'] in found for b, _ in missed)} / {len(hit_again)} of "
            f"{len(missed)}" + (f" ({len(hit_again) / len(missed):.0%})" if missed else ""),
            f"{mean([b['f1'] for b, _ in missed]):.3f} -> {mean([a['f1'] for _, a in missed]):.3f}",
            f"{mean([tb[k]['f1'] for k in keys]):.3f} -> {mean([ta[k]['f1'] for k in keys]):.3f} "
            f"({t_better} / {t_worse})",
        ]
        if against:
            old = rows(against, dataset)["fallback"]
            common = {k[1]: v for k, v in old.items()}
            both = [q["question"] for q in before if q["question"] in common]
            b2 = sum(tb[k]["f1"] > common[k]["f1"] + 1e-9 for k in both)
            w2 = sum(tb[k]["f1"] < common[k]["f1"] - 1e-9 for k in both)
            cells.append(f"{b2} / {w2}")
        row(cells)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", default="four")
    parser.add_argument("--against")
    parser.add_argument("--sets", default=",".join(KINDS))
    parser.add_argument("--traffic", action="store_true", help="a refine-from-traffic run")
    parser.add_argument("--peers", action="store_true", help="every method of one run")
    parser.add_argument("--pair", metavar="TAG", help="the fallback rows of two runs alone")
    parser.add_argument(
        "--chunks-from", metavar="TAG", help="the rag and rag-ordered rows from this run"
    )
    parser.add_argument(
        "--traffic-against", metavar="TAG", help="with --traffic: pair it with another such run"
    )
    args = parser.parse_args()
    if args.pair:
        pair_table(args.tag, args.pair, args.sets.split(","))
    elif args.peers:
        peers_table(args.tag, args.sets.split(","))
    elif args.traffic and args.traffic_against:
        traffic_against(args.tag, args.traffic_against, args.sets.split(","))
    elif args.traffic:
        traffic_table(args.tag, args.sets.split(","), args.against)
    else:
        table(args.tag, args.sets.split(","), args.against, args.chunks_from)
