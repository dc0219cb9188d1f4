"""Markdown tables (and the issue's ratios) from ``cos eval`` result files.

    python benchmarks/report.py benchmarks/results/squad-default.json [more.json ...]

Prints what BENCHMARKS.md records, so the figures there are copied, not typed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cos_integrations.research.evaluation import (
    ABLATION_COLUMNS,
    RETRIEVAL_COLUMNS,
    ablation_table,
    is_retrieval,
    retrieval_table,
)

COLUMNS = [
    ("heldout_f1", "held-out F1", "{:.3f}"),
    ("heldout_em", "EM", "{:.3f}"),
    ("oracle_heldout_f1", "oracle F1", "{:.3f}"),
    ("summary_tokens", "summary tok", "{:.0f}"),
    ("source_tokens", "source tok", "{:.0f}"),
    ("calls_per_doc", "calls/doc", "{:.1f}"),
    ("prompt_tokens_per_doc", "prompt tok/doc", "{:.0f}"),
    ("cached_tokens_per_doc", "cached tok/doc", "{:.0f}"),
    ("completion_tokens_per_doc", "completion tok/doc", "{:.0f}"),
    ("seconds_per_doc", "s/doc", "{:.0f}"),
]


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "n/a"


def report(path: Path) -> str:
    r = json.loads(path.read_text())
    m = r["methods"]
    lines = [f"### {path.name}: {r['dataset']}, {r['docs']} docs, model {r['model']}", ""]
    lines.append("| method | docs | " + " | ".join(c[1] for c in COLUMNS) + " |")
    lines.append("|---" * (len(COLUMNS) + 2) + "|")
    for name, v in m.items():
        if is_retrieval(name):
            continue
        cells = [fmt.format(v[k]) if k in v else "" for k, _, fmt in COLUMNS]
        lines.append(f"| {name} | {v['docs']} | " + " | ".join(cells) + " |")
    per = m.get("cos", {}).get("heldout_f1_per_iteration")
    if per:
        lines += ["", "CoS held-out F1 per iteration (0 = thesis): "]
        lines[-1] += ", ".join(f"{i}: {f:.3f}" for i, f in per.items())
    cos, zs, content, ref = (m.get(k, {}) for k in ("cos", "zero-shot", "content", "reference"))
    lines += ["", "| ratio | value |", "|---|---|"]
    lines.append(
        f"| CoS held-out F1 / zero-shot | {ratio(cos.get('heldout_f1'), zs.get('heldout_f1'))} |"
    )
    lines.append(
        f"| CoS held-out F1 / content | {ratio(cos.get('heldout_f1'), content.get('heldout_f1'))} |"
    )
    if ref:
        lines.append(
            f"| CoS calls / reference calls | "
            f"{ratio(cos.get('calls_per_doc'), ref.get('calls_per_doc'))} |"
        )
    lines.append(
        f"| CoS summary tokens / source tokens | "
        f"{ratio(cos.get('summary_tokens'), cos.get('source_tokens'))} |"
    )
    rows = retrieval_table(m)
    if rows:
        lines += ["", "| " + " | ".join(RETRIEVAL_COLUMNS) + " |"]
        lines.append("|---" * len(RETRIEVAL_COLUMNS) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        ablation = ablation_table(m)
        if ablation:
            lines += ["", "| " + " | ".join(ABLATION_COLUMNS) + " |"]
            lines.append("|---" * len(ABLATION_COLUMNS) + "|")
            lines += ["| " + " | ".join(row) + " |" for row in ablation]
        fb = m.get("fallback", {})
        if fb.get("refine_outcomes"):
            lines += ["", f"refine jobs: {fb['refine_outcomes']}"]
    fb = m.get("fallback")
    if fb and "questions" not in fb:
        lines += ["", "| fallback | F1 | hit rate | context tokens/question |", "|---|---|---|---|"]
        for label, v in (
            ("all scored questions", fb),
            *(
                (f"test half, {p.split('_')[1]} refinement", fb[p])
                for p in ("test_before", "test_after")
                if p in fb
            ),
        ):
            lines.append(
                f"| {label} ({fb['docs']} docs) | {v['heldout_f1']:.3f} | {v['hit_rate']:.0%} "
                f"| {v['context_tokens']:.0f} |"
            )
    if fb and "questions" not in fb and ("hit_f1" in fb or "miss_f1" in fb):
        lines += [
            "",
            f"F1 of hits (answered from summaries) {fb.get('hit_f1', float('nan')):.3f}, "
            f"of misses (answered from source chunks) {fb.get('miss_f1', float('nan')):.3f} "
            "(means over documents, test half before refinement)",
        ]
    if r.get("errors"):
        lines += ["", f"errors: {len(r['errors'])} (left out of the means)"]
    return "\n".join(lines)


if __name__ == "__main__":
    print("\n\n".join(report(Path(p)) for p in sys.argv[1:]))
