#!/usr/bin/env bash
# The product against plain chunk RAG on the same index (issue: beat plain RAG).
# One index holds the first N SQuAD dev chunks (summaries + 160-word chunks, e5); every
# method answers the second half of each chunk's 10 human questions, one question a call,
# with the library's answer prompt: rag (top-k chunks), fallback (the product, with the hit
# rule given in EXTRA), right-doc (the whole right chunk: the ceiling). Summaries are reused
# from a recorded run (SUMMARIES, METHOD) so every variant reads the same ones; answers are
# cached by exact prompt in ANSWERS, so a variant that asks rag's prompt again reuses it.
#   [OUT=...] [EXTRA="--hit-context best --threshold 0"] bash benchmarks/rag_eval.sh N MODEL METHODS
# The hit rule defaults to the product's (retrieval.DEFAULT_*). The runs in BENCHMARKS.md:
#   A (as shipped before): EXTRA="--hit-context summaries --threshold 0.75 --no-require-support"
#   B, C: EXTRA="--hit-context best|best+chunk --threshold 0 --no-require-support", METHODS=fallback
#   D2: the same as C over 60-word summaries (SUMMARIES=...squad-default-60w.json.docs.jsonl)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
N=${1:-30}
MODEL=${2:-default}
METHODS=${3:-rag,fallback,right-doc}
SUMMARIES=${SUMMARIES:-benchmarks/results/squad-default-v3.json.docs.jsonl}
METHOD=${METHOD:-zero-shot}
OUT=${OUT:-benchmarks/results/rag-$MODEL.json}
ANSWERS=${ANSWERS:-benchmarks/results/answers-$MODEL.jsonl}
mkdir -p benchmarks/results
# shellcheck disable=SC2086
cos eval --data ../shared/data/squad-v1.1-dev-chunks.jsonl --limit "$N" --local-model "$MODEL" \
  --methods "$METHODS" --train-questions 4 --val-questions 3 --iterations 2 \
  --questions-per-iteration 2 --heldout-questions 10 --max-summary-words 120 \
  --summaries-from "$SUMMARIES" --summary-method "$METHOD" --answer-cache "$ANSWERS" \
  --test-half --k 2 ${EXTRA:-} --out "$OUT"
python benchmarks/pack_results.py  # the records, compressed for the repository
