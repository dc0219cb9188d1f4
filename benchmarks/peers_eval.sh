#!/usr/bin/env bash
# The product beside the summary retrievers users already have (issue 28), run as their
# real classes ('peers' extra): LlamaIndex DocumentSummaryIndex (doc-summary) and the RAPTOR
# pack (raptor), LangChain MultiVectorRetriever over summaries (multi-vector) and
# ParentDocumentRetriever (parent-doc); with the chunk baselines rag (top-k), rag-ordered
# (DOS RAG: the same chunks in document order) and rag-contextual (each chunk embedded with
# its document's summary in front), fallback over the shipped default's summaries
# (prompts-v3 zero-shot at 120 words, as `cos ingest` writes them) and right-doc. The same
# first N SQuAD dev chunks, the test half of each chunk's 10 questions, k = 2, one answer
# call a question with the library's answer prompt; each peer's summaries made by its own
# default prompts on the same embedded model, its ingest calls, tokens and seconds
# charged. Answers are cached by exact prompt (ANSWERS): rag's calls are shared with the
# earlier runs. Alone on the CPU.
#   [OUT=...] [METHODS=...] bash benchmarks/peers_eval.sh N
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
N=${1:-10}
DATA=${DATA:-../shared/data/squad-v1.1-dev-chunks.jsonl}
METHODS=${METHODS:-rag,rag-ordered,rag-contextual,fallback,right-doc,doc-summary,multi-vector,parent-doc,raptor}
SUMMARIES=${SUMMARIES:-benchmarks/results/strategies-30.summaries.jsonl}
METHOD=${METHOD:-zero-shot}
OUT=${OUT:-benchmarks/results/peers-$N.json}
ANSWERS=${ANSWERS:-benchmarks/results/answers-default.jsonl}
mkdir -p benchmarks/results
cos eval --data "$DATA" --limit "$N" --local-model default --methods "$METHODS" \
  --preset cos --max-summary-words 120 --heldout-questions 10 \
  --summaries-from "$SUMMARIES" --summary-method "$METHOD" --answer-cache "$ANSWERS" \
  --test-half --k 2 ${EXTRA:-} --out "$OUT"
python benchmarks/report.py "$OUT"
python benchmarks/pack_results.py  # the records, compressed for the repository
