#!/usr/bin/env bash
# The product on long documents (issue 26 item 1's second table, issue 28 item 3): the N
# long documents of long_eval.sh (whole SQuAD articles and COVID-QA papers, 5,500-6,300
# tokens each) in one index, where a document's one summary competes with its own ~40
# chunks. fallback over the shipped default's summaries (zero-shot at 120 words, made in
# this run and recorded), beside rag (top-2 chunks), rag-ordered and the RAPTOR pack (the
# 'peers' extra); the test half of each document's first 10 questions, k = 2, the same
# answer call. Whole-document methods (right-doc, parent-doc, doc-summary) are left out by
# default: two 6,000-token documents overflow the 12,288-token context. Alone on the CPU.
#   [METHODS=...] [OUT=...] bash benchmarks/long_product_eval.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
N=${1:-8}
METHODS=${METHODS:-rag,rag-ordered,fallback,raptor}
OUT=${OUT:-benchmarks/results/long-product-$N.json}
ANSWERS=${ANSWERS:-benchmarks/results/answers-default.jsonl}
DATA=benchmarks/results/long-docs.jsonl
python benchmarks/make_long_docs.py --out "$DATA" --articles 4 --covid 4 --max-words 4000
cos eval --data "$DATA" --limit "$N" --local-model default --context-tokens 12288 \
  --methods "$METHODS" --preset cos --max-summary-words 120 --heldout-questions 10 \
  --no-oracle --summary-method zero-shot --answer-cache "$ANSWERS" --test-half --k 2 \
  ${EXTRA:-} --out "$OUT"
python benchmarks/report.py "$OUT"
python benchmarks/pack_results.py  # the records, compressed for the repository
