"""The answered-miss route's paraphrase match on the four sets, with and without it, from one
refine-from-traffic run that asks each traffic question's paraphrase (no model calls here).

The run (an experiment commit of ``cos eval``: every question whose answer took the
paraphrase match, i.e. hit through it, is asked once more right after with
``retrieval.PARAPHRASE_SIMILARITY`` set past 1, and that row kept as
``without_paraphrase_route``; a row the match did not take is the same either way, the
judge being deterministic):

    TAG=para EXTRA="--refine-from-traffic --repeat-traffic" bash benchmarks/four_sets.sh
    python benchmarks/paraphrase_route.py [--tag para]

Per kind of text and phase (the traffic asked again, its paraphrases, the unseen test
questions after refinement): how many questions the match took, F1 and hits with / without
it, paired (with better / worse), and prompt tokens a question with / without.
"""

from __future__ import annotations

import argparse

from four_sets_table import LABELS, RESULTS, header, languages, mean, row

from cos_integrations.metrics import squad_f1
from cos_integrations.research.jsonl import read_jsonl

PHASES = {
    "traffic_again": "traffic again",
    "paraphrases": "paraphrases",
    "questions_after": "unseen after",
}


def phase_rows(tag: str, dataset: str, phase: str) -> list[tuple[dict, dict]]:
    """Each question of ``phase`` as (with the match, without it), F1 in its language."""
    language = languages(dataset)
    out = []
    for rec in read_jsonl(RESULTS / f"{tag}-{dataset}.json.docs.jsonl"):
        if rec.get("method") != "fallback":
            continue
        lang = language.get(rec["doc_id"], "en")
        for q in rec.get(phase) or []:
            other = q.get("without_paraphrase_route") or q
            out.append(
                tuple(
                    {**r, "f1": squad_f1(r.get("answer") or "", q["gold"], lang)}
                    for r in (q, other)
                )
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tag", default="para")
    parser.add_argument("--sets", default="squad,covid,fairy,german")
    args = parser.parse_args()
    header(
        [
            "text",
            "phase",
            "taken by the match",
            "F1 with / without (paired)",
            "hits with / without",
            "prompt tokens with / without",
        ]
    )
    for dataset in args.sets.split(","):
        for phase, name in PHASES.items():
            pairs = phase_rows(args.tag, dataset, phase)
            taken = sum("without_paraphrase_route" in a for a, _ in pairs)
            better = sum(a["f1"] > b["f1"] + 1e-9 for a, b in pairs)
            worse = sum(a["f1"] < b["f1"] - 1e-9 for a, b in pairs)
            cells = [
                LABELS.get(dataset, dataset),
                name,
                f"{taken} of {len(pairs)}",
                f"{mean([a['f1'] for a, _ in pairs]):.3f} / "
                f"{mean([b['f1'] for _, b in pairs]):.3f} ({better} / {worse})",
                f"{sum(bool(a.get('hit')) for a, _ in pairs)} / "
                f"{sum(bool(b.get('hit')) for _, b in pairs)}",
                f"{mean([a.get('prompt_tokens', 0) for a, _ in pairs]):.0f} / "
                f"{mean([b.get('prompt_tokens', 0) for _, b in pairs]):.0f}",
            ]
            row(cells)


if __name__ == "__main__":
    main()
