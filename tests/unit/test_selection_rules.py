"""benchmarks/selection_rules.py replays recorded iterations: its 'engine now' rule must be
the engine's own rule, or the comparison it prints is about something else."""

import importlib.util
import json
from pathlib import Path

from cos_integrations.research.evaluation import iteration_record
from cos_integrations.summarize.engine import select_iteration
from cos_integrations.summarize.result import IterationRecord

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "selection_rules.py"


def _load():
    spec = importlib.util.spec_from_file_location("selection_rules", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _record(its: list[IterationRecord], heldout: list[float]) -> dict:
    return {
        "method": "cos",
        "heldout_f1_per_iteration": [[it.index, f] for it, f in zip(its, heldout, strict=True)],
        "iterations": [iteration_record(it) for it in its],
    }


def test_engine_rule_replayed_and_alternatives_scored(tmp_path):
    rules = _load()
    tie = [
        IterationRecord(index=0, kind="thesis", summary="a b", train_score=0.25, val_score=0.0),
        IterationRecord(index=1, kind="rewrite", summary="a b c", train_score=0.5, val_score=0.0),
        IterationRecord(index=2, kind="rewrite", summary="z", val_score=0.9, accepted=False),
    ]
    clear = [
        IterationRecord(index=0, kind="thesis", summary="a", train_score=0.0, val_score=0.6),
        IterationRecord(index=1, kind="rewrite", summary="a b", train_score=1.0, val_score=0.3),
    ]
    engine_rule = rules.RULES["validation, ties higher refinement score (engine now)"]
    for its in (tie, clear):
        recorded = _record(its, [0.0] * len(its))["iterations"]
        replayed = engine_rule([r for r in recorded if r["accepted"] and not r["failed"]])
        assert replayed["index"] == select_iteration(its).index
    path = tmp_path / "r.docs.jsonl"
    unscored = _record([IterationRecord(index=0, kind="thesis", summary="a", failed=True)], [0])
    unscored.update(heldout_f1_per_iteration=[], heldout_f1=0.1)  # every rule returns it
    lines = [_record(tie, [0.2, 0.6, 1.0]), _record(clear, [0.4, 0.1]), {"method": "zero-shot"}]
    lines.append(unscored)
    path.write_text("\n".join(json.dumps(r) for r in lines))
    table = rules.replay([path])
    assert table.startswith("3 documents")
    # engine now: iteration 1 (0.6), 0 (0.4), the unscored 0.1; old rule: 0.2, 0.4, 0.1
    assert "| validation, ties higher refinement score (engine now) | 0.367 |" in table
    assert "| validation, ties shorter (engine until prompts v3) | 0.233 |" in table
    # the rejected rewrite (held-out 1.0) is never chosen, but the oracle sees it
    assert "| oracle (best on the held-out questions) | 0.500 |" in table
