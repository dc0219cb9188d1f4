#!/usr/bin/env bash
# CoS against its baselines on long documents (whole SQuAD articles and COVID-QA papers,
# 3,000-3,700 words, alternating) with the embedded model:
#   bash benchmarks/long_eval.sh [N_DOCS] [LOCAL_MODEL]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
N=${1:-8}
MODEL=${2:-default}
OUT=benchmarks/results/long-$MODEL.json
DATA=benchmarks/results/long-docs.jsonl
mkdir -p benchmarks/results
python benchmarks/make_long_docs.py --out "$DATA" --articles 4 --covid 4 --max-words 3700
cos eval --data "$DATA" --limit "$N" --local-model "$MODEL" --context-tokens 12288 \
  --methods cos,zero-shot,content --train-questions 4 --val-questions 3 --iterations 2 \
  --questions-per-iteration 2 --heldout-questions 10 --max-summary-words 200 \
  --out "$OUT" --plot "${OUT%.json}.png"
