#!/usr/bin/env bash
# CoS against its baselines on SQuAD chunks with the embedded model. Usage:
#   bash benchmarks/squad_eval.sh [N_DOCS] [LOCAL_MODEL]
# The full issue-8 run is 30 documents with the paper's question counts; on 2 CPU cores that
# takes hours, so the defaults are a small, honest sample.
set -euo pipefail
N=${1:-3}
MODEL=${2:-default}
DATA=${DATA:-../shared/data/squad-v1.1-dev-chunks.jsonl}
cos eval --data "$DATA" --limit "$N" --local-model "$MODEL" \
  --methods cos,zero-shot,reference,content,fallback --train-questions 4 --val-questions 3 \
  --iterations 2 --questions-per-iteration 2 --heldout-questions 10 --max-summary-words 120 \
  --out "benchmarks/results-squad-$N-$MODEL.json" --plot "benchmarks/squad-$N-$MODEL.png"
