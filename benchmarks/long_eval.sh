#!/usr/bin/env bash
# CoS against its baselines on long documents (whole SQuAD articles and COVID-QA papers,
# 3,000-4,000 words, alternating: 4 of each) with the embedded model:
#   [OUT=results.json] bash benchmarks/long_eval.sh [N_DOCS] [LOCAL_MODEL] [METHODS]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
N=${1:-8}
MODEL=${2:-default}
METHODS=${3:-cos,zero-shot,content}
OUT=${OUT:-benchmarks/results/long-$MODEL.json}
DATA=benchmarks/results/long-docs.jsonl
mkdir -p benchmarks/results
python benchmarks/make_long_docs.py --out "$DATA" --articles 4 --covid 4 --max-words 4000
cos eval --data "$DATA" --limit "$N" --local-model "$MODEL" --context-tokens 12288 \
  --methods "$METHODS" --train-questions 4 --val-questions 3 --iterations 2 \
  --questions-per-iteration 2 --heldout-questions 10 --max-summary-words 200 \
  --summary-method cos --all-questions \
  --out "$OUT" --plot "${OUT%.json}.png"
python benchmarks/pack_results.py  # the records, compressed for the repository
