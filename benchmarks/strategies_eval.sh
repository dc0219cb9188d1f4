#!/usr/bin/env bash
# The product over each summary strategy, side by side (issue 26, "Chain of Summaries must
# earn its calls"). Two steps, resumable, alone on the CPU:
#  1. ingest: summarise the first N documents with each strategy under the SHIPPED config
#     (--preset cos: 6+4 questions, 3 rounds, 200-word budget), timing each document's
#     ingest (seconds, calls, tokens; no oracle answering inside the timing);
#  2. product: one index per strategy over the same 160-word chunks, the test half of each
#     document's questions through fallback[STRATEGY] (the default hit rule, the index's
#     calibrated threshold), beside rag (top-k chunks) and right-doc; every hit also
#     answered from its summary sentences, its chunk sentences and its whole best chunk
#     alone (--hit-ablation). EXTRA_SUMMARIES (a .docs.jsonl) adds recorded summaries under
#     their method names with a suffix: the prompts-v3 zero-shot run at a 120-word budget
#     (the summaries behind the earlier product figures) is merged as zero-shot-120w.
# WORDS sets the summary budget (the preset's 200 by default).
#   [DATA=...] [OUT=...] [WORDS=120] bash benchmarks/strategies_eval.sh N [STRATEGIES]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
N=${1:-10}
STRATEGIES=${2:-zero-shot,cos,cos-extract}
DATA=${DATA:-../shared/data/squad-v1.1-dev-chunks.jsonl}
WORDS=${WORDS:-200}
OUT=${OUT:-benchmarks/results/strategies-$N.json}
ANSWERS=${ANSWERS:-benchmarks/results/answers-default.jsonl}
EXTRA_SUMMARIES=${EXTRA_SUMMARIES-benchmarks/results/squad-default-v3.json.docs.jsonl}
EXTRA_AS=${EXTRA_AS:-zero-shot=zero-shot-120w}
mkdir -p benchmarks/results
cos eval --data "$DATA" --limit "$N" --local-model default --methods "$STRATEGIES" \
  --preset cos --max-summary-words "$WORDS" --no-oracle --heldout-questions 10 --out "$OUT"
SUMMARIES="$OUT.docs.jsonl"
ALL="$STRATEGIES"
if [ -n "$EXTRA_SUMMARIES" ]; then
  SUMMARIES="${OUT%.json}.summaries.jsonl"
  python benchmarks/merge_summaries.py "$OUT.docs.jsonl" "$EXTRA_SUMMARIES=$EXTRA_AS" > "$SUMMARIES"
  ALL="$STRATEGIES,${EXTRA_AS#*=}"
fi
cos eval --data "$DATA" --limit "$N" --local-model default --methods rag,fallback,right-doc \
  --preset cos --max-summary-words "$WORDS" --summaries-from "$SUMMARIES" --summary-method "$ALL" --test-half --k 2 \
  --hit-ablation --answer-cache "$ANSWERS" ${EXTRA:-} --out "${OUT%.json}-product.json"
python benchmarks/report.py "${OUT%.json}-product.json"
python benchmarks/pack_results.py  # the records, compressed for the repository
