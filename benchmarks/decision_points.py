"""How many decisions the query path makes (issue 43 item 6): the decision points (``if``,
conditional expressions, each extra operand of ``and``/``or``, loops, comprehension
filters, ``except`` clauses, ``match`` cases) of every function reachable from
``FallbackRetriever.aretrieve`` by name within the modules of the hit path, and the number
of ``HitRule`` fields. No model calls; reads the source of a checkout:

    python benchmarks/decision_points.py [ROOT]        # ROOT: a checkout (default: here)
    git worktree add /tmp/old v0.1 && python benchmarks/decision_points.py /tmp/old
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MODULES = [
    "cos_integrations/serving/retrieval.py",
    "cos_integrations/serving/hit_rule.py",
    "cos_integrations/text.py",
    "cos_integrations/metrics.py",
]
START = "aretrieve"


def decisions(node: ast.AST) -> int:
    n = 0
    for sub in ast.walk(node):
        if isinstance(sub, (ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While)):
            n += 1
        elif isinstance(sub, ast.BoolOp):
            n += len(sub.values) - 1
        elif isinstance(sub, ast.comprehension):
            n += len(sub.ifs)
        elif isinstance(sub, ast.ExceptHandler):
            n += 1
        elif isinstance(sub, ast.match_case):
            n += 1
    return n


def called_names(node: ast.AST) -> set[str]:
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            names.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))
        elif isinstance(sub, ast.Attribute):  # properties (rule.context) and passed methods
            names.add(sub.attr)
        elif isinstance(sub, ast.Name):  # functions passed as values (offload(f, ...))
            names.add(sub.id)
    return names


def main(root: Path) -> None:
    functions: dict[str, ast.AST] = {}
    for rel in MODULES:
        tree = ast.parse((root / rel).read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.setdefault(node.name, node)
    seen, todo = set(), [START]
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        todo += sorted(called_names(functions[name]) - seen)
    total = sum(decisions(functions[n]) for n in seen)
    fields = 0
    tree = ast.parse((root / "cos_integrations/serving/hit_rule.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "HitRule":
            fields = sum(isinstance(b, ast.AnnAssign) for b in node.body)
    print(f"HitRule fields: {fields}")
    print(f"functions reachable from {START}: {len(seen)}; decision points: {total}")
    for name in sorted(seen, key=lambda n: -decisions(functions[n])):
        print(f"  {decisions(functions[name]):3d}  {name}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("."))
