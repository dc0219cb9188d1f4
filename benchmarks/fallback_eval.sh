#!/usr/bin/env bash
# The product: fallback retrieval over the CoS summaries of the first N SQuAD chunks, and the
# learning loop (ask half the held-out questions as traffic, refine from the misses, re-test
# the other half). Reuses the CoS summaries of squad_eval.sh (same config) when present.
#   bash benchmarks/fallback_eval.sh [N_DOCS] [LOCAL_MODEL]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
N=${1:-5}
MODEL=${2:-default}
OUT=benchmarks/results/fallback-$MODEL.json
mkdir -p benchmarks/results
SRC=benchmarks/results/squad-$MODEL.json.docs.jsonl
if { [ -f "$SRC" ] || [ -f "$SRC.gz" ]; } && [ ! -f "$OUT.docs.jsonl" ] && [ ! -f "$OUT.docs.jsonl.gz" ]; then
  python benchmarks/merge_summaries.py "$SRC=cos" > "$OUT.docs.jsonl"
fi
cos eval --data ../shared/data/squad-v1.1-dev-chunks.jsonl --limit "$N" --local-model "$MODEL" \
  --methods cos,fallback --refine-from-traffic --train-questions 4 --val-questions 3 \
  --iterations 2 --questions-per-iteration 2 --heldout-questions 10 --max-summary-words 120 \
  --summary-method cos --all-questions \
  --out "$OUT"
python benchmarks/pack_results.py  # the records, compressed for the repository
