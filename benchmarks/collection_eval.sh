#!/usr/bin/env bash
# A collection of real size (issue 28 item 2): the first N questioned SQuAD dev chunks among
# D distractors from the rest of ../shared/data (benchmarks/make_collection.py: other SQuAD
# articles, FairytaleQA stories and COVID-QA papers cut to 600 words), all in one index,
# every document summarised the shipped way (zero-shot at 120 words, as `cos ingest`'s
# tiered default writes them; resumable: summaries are recorded as they finish). The same
# test half of the questioned chunks' questions as peers_eval.sh, so the rows compare with
# its 30-document figures: hit rate, wrong-document hits, F1, tokens. Alone on the CPU.
#   [METHODS=...] [SQUAD=120 FAIRY=30 COVID=20] bash benchmarks/collection_eval.sh N
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
N=${1:-30}
SQUAD=${SQUAD:-120}
FAIRY=${FAIRY:-30}
COVID=${COVID:-20}
D=$((SQUAD + FAIRY + COVID))
METHODS=${METHODS:-rag,fallback,right-doc}
DISTRACTORS=benchmarks/results/distractors-$D.jsonl
OUT=${OUT:-benchmarks/results/collection-$N+$D.json}
ANSWERS=${ANSWERS:-benchmarks/results/answers-default.jsonl}
python benchmarks/make_collection.py --skip "$N" --squad "$SQUAD" --fairytale "$FAIRY" \
  --covid "$COVID" --out "$DISTRACTORS"
cos eval --data ../shared/data/squad-v1.1-dev-chunks.jsonl --limit "$N" \
  --distractors "$DISTRACTORS" --local-model default --methods "$METHODS" \
  --preset cos --max-summary-words 120 --heldout-questions 10 --no-oracle \
  --summary-method zero-shot --answer-cache "$ANSWERS" --test-half --k 2 ${EXTRA:-} \
  --out "$OUT"
python benchmarks/report.py "$OUT"
python benchmarks/pack_results.py  # the records, compressed for the repository
