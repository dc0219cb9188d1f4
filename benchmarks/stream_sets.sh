#!/usr/bin/env bash
# Recurring traffic on four kinds of text (issue 56): `cos eval --stream`, one stream of
# ASKS asks per kind of text through the product, rag, rag-ordered and rag behind the caches
# users run (LangChain's InMemoryCache; the semantic-cache pattern at RedisVL's default bar
# and at its best), each row paying what its path pays. The collection: the kind's two
# four_sets.sh slices questioned (their first 16 questions a document: 160 new questions;
# COVID-QA 16 papers), the collection run's documents as distractors (200+ documents in
# all; benchmarks/make_stream_sets.py), every summary the shipped zero-shot one. Answers
# shared by exact prompt (answers-sets.jsonl, so a one-question run's answers are reused),
# every other call kept by request (calls-stream-SET.jsonl), rewordings kept
# (rewordings-SET.jsonl): a rerun with other product settings pays only what differs.
# A longer stream writes rewordings of more questions into its book, and a shorter stream
# built from that book draws other rewordings: give a longer stream its own book (BOOK=,
# e.g. BOOK=rewordings-squad1000 for the 1,000-ask SQuAD stream). Alone on the CPU.
#   [SETS="squad covid"] [ASKS=400] [TAG=stream] [METHODS=...] [EXTRA=...] [BOOK=...] bash benchmarks/stream_sets.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# the records, compressed for the repository, also when the run stops early (a stopped
# run's calls then replay on the next one instead of being lost with the plain files)
trap 'python benchmarks/pack_results.py' EXIT
trap 'exit 143' TERM INT
export PATH="$PWD/.venv/bin:$PATH"
SETS=${SETS:-squad covid fairy german}
ASKS=${ASKS:-400}
TAG=${TAG:-stream}
METHODS=${METHODS:-fallback,rag,rag-ordered}
python benchmarks/make_stream_sets.py $SETS
for set in $SETS; do
  s=benchmarks/results/streams/$set
  out=benchmarks/results/$TAG-$set.json
  start=$(date +%s)
  # shellcheck disable=SC2086
  cos eval --data "$s.jsonl" --distractors "$s-distractors.jsonl" --local-model default \
    --methods "$METHODS" --summaries-from "$s-summaries.docs.jsonl" \
    --answer-cache benchmarks/results/answers-sets.jsonl --stream "$ASKS" \
    --rewordings "benchmarks/results/${BOOK:-rewordings-$set}.jsonl" \
    --call-record "benchmarks/results/calls-stream-$set.jsonl" ${EXTRA:-} \
    --out "$out" --plot "benchmarks/results/$TAG-$set.png"
  echo "$set: $(( $(date +%s) - start )) s"
done
