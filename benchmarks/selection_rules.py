"""Which best-iteration rule would have scored best? Replays the recorded iterations.

    python benchmarks/selection_rules.py benchmarks/results/squad-default.json.docs.jsonl [...]

Every ``cos`` record written by ``cos eval`` keeps, per iteration, its refinement and
validation scores (synthetic questions) and its held-out F1 (human questions). This script
applies alternative selection rules to those records, so a rule can be compared on the same
summaries without another model run. Only the rule changes: the rewrites themselves were
built on the engine's keep-better path, so a rule that would also change which rewrite the
next round builds on is not replayed here. Records without per-iteration scores (written
before they were recorded) are skipped.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from cos_integrations.research.jsonl import read_jsonl
from cos_integrations.summarize.engine import select_iteration
from cos_integrations.summarize.result import IterationRecord

Iteration = dict
Rule = Callable[[list[Iteration]], Iteration]


def _val(it: Iteration) -> float:
    return it["val_score"] if it["val_score"] is not None else (it["train_score"] or 0.0)


def _all(it: Iteration, n_train: int, n_val: int) -> float:
    """Mean over every synthetic question (refinement and validation together)."""
    t, v = it["train_score"] or 0.0, it["val_score"] or 0.0
    return (t * n_train + v * n_val) / (n_train + n_val)


def _engine(its: list[Iteration]) -> Iteration:
    """The engine's own rule (``engine.select_iteration``), applied to the recorded iterations."""
    records = [
        IterationRecord(
            index=it["index"],
            kind=it["kind"],
            summary="w " * it["words"],  # only the length matters to the rule
            train_score=it["train_score"],
            val_score=it["val_score"],
            accepted=it["accepted"],
            failed=it["failed"],
        )
        for it in its
    ]
    return its[records.index(select_iteration(records))]


RULES: dict[str, Rule] = {
    # the rule the recorded runs used: validation, ties to the shorter, then the earlier
    "validation, ties shorter (engine until prompts v3)": lambda its: max(
        its, key=lambda it: (_val(it), -it["words"], -it["index"])
    ),
    "validation, ties higher refinement score (engine now)": _engine,
    "validation, ties later": lambda its: max(its, key=lambda it: (_val(it), it["index"])),
    "all synthetic questions (4 train + 3 val)": lambda its: max(
        its, key=lambda it: (_all(it, 4, 3), -it["words"], -it["index"])
    ),
    "always the thesis (zero-shot)": lambda its: its[0],
    "always the last accepted rewrite": lambda its: its[-1],
}


def replay(paths: list[Path]) -> str:
    rows: dict[str, list[float]] = {name: [] for name in RULES}
    oracle: list[float] = []
    for path in paths:
        for rec in read_jsonl(path):
            if rec["method"] != "cos" or "iterations" not in rec:
                continue
            heldout = {int(i): f for i, f in rec["heldout_f1_per_iteration"]}
            its = [
                it
                for it in rec["iterations"]
                if not it["failed"] and it["accepted"] and it["index"] in heldout
            ]
            if not its:  # the thesis could not be scored: every rule returns it
                heldout, its = {0: rec["heldout_f1"]}, rec["iterations"][:1]
            for name, rule in RULES.items():
                rows[name].append(heldout[rule(its)["index"]])
            oracle.append(max(heldout.values()))
    n = len(oracle)
    out = [f"{n} documents with per-iteration scores in {', '.join(p.name for p in paths)}", ""]
    out += ["| selection rule | held-out F1 |", "|---|---|"]
    for name, fs in rows.items():
        out.append(f"| {name} | {sum(fs) / n:.3f} |" if n else f"| {name} | n/a |")
    if n:
        out.append(f"| oracle (best on the held-out questions) | {sum(oracle) / n:.3f} |")
    return "\n".join(out)


if __name__ == "__main__":
    print(replay([Path(p) for p in sys.argv[1:]]))
