#!/usr/bin/env bash
# The product on four kinds of text, one default (issue 43 item 5): fallback beside rag and
# rag-ordered (top-2 chunks, in rank and in document order) on a slice of each development
# set of ../shared/data (see its README.md for where each comes from):
#   squad    SQuAD v1.1 chunks: the first chunk of five articles never used to tune the
#            hit path (lines 100, 111, 150, 198, 270: Genghis Khan, Immune system, Prime
#            number, Doctor Who, Chloroplast)
#   covid    COVID-QA part A: its first 8 papers (long scientific text, sentence answers)
#   fairy    FairytaleQA train: its first 5 stories (narrative, free-form answers)
#   german   XQuAD German: every 5th article (lines 5, 10, 15, 20, 25)
# and a second slice of each, never run while the hit path was chosen (text it was not
# tuned on: SETS="squad2 covid2 fairy2 german2"):
#   squad2   the first chunk of articles 14, 17, 20, 23, 26 (lines 122, 138, 157, 183, 212:
#            Civil disobedience, Jacksonville, Islamism, Force, Normans)
#   covid2   COVID-QA part A: papers 9-16
#   fairy2   FairytaleQA train: stories 6-10
#   german2  XQuAD German: every 5th article from line 2 (lines 2, 7, 12, 17, 22)
# `cos eval`'s own defaults are the run: each set one index of its documents (zero-shot
# summaries at 120 words, the shipped tiered ingest, made in the first run and recorded);
# each document's first 16 questions, the second half asked (the first half calibrates the
# threshold, or is the traffic with EXTRA=--refine-from-traffic); the measured hit rule;
# k = 2; the same answer call for every row, answers cached by exact prompt. Nothing is set
# per set, nor passed beyond the data, the model and the records. Alone on the CPU.
#   [SETS="squad covid"] [TAG=name] [EXTRA=...] bash benchmarks/four_sets.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# the records, compressed for the repository, also when the run stops early (a stopped
# run's calls then replay on the next one instead of being lost with the plain files)
trap 'python benchmarks/pack_results.py' EXIT
trap 'exit 143' TERM INT
export PATH="$PWD/.venv/bin:$PATH"
DATA=${DATA:-../shared/data}
SETS=${SETS:-squad covid fairy german}
TAG=${TAG:-four}
METHODS=${METHODS:-rag,rag-ordered,fallback}
ANSWERS=${ANSWERS:-benchmarks/results/answers-sets.jsonl}
mkdir -p benchmarks/results/sets
slice() {  # the set's documents, by line number of its file
  case "$1" in
    squad) sed -n '100p;111p;150p;198p;270p' "$DATA/squad-v1.1-dev-chunks.jsonl" ;;
    covid) sed -n '1,8p' "$DATA/covidqa-part-a.jsonl" ;;
    fairy) sed -n '1,5p' "$DATA/fairytaleqa-train.jsonl" ;;
    german) sed -n '5p;10p;15p;20p;25p' "$DATA/xquad-de-dev.jsonl" ;;
    squad2) sed -n '122p;138p;157p;183p;212p' "$DATA/squad-v1.1-dev-chunks.jsonl" ;;
    covid2) sed -n '9,16p' "$DATA/covidqa-part-a.jsonl" ;;
    fairy2) sed -n '6,10p' "$DATA/fairytaleqa-train.jsonl" ;;
    german2) sed -n '2p;7p;12p;17p;22p' "$DATA/xquad-de-dev.jsonl" ;;
    *) echo "unknown set $1" >&2; return 2 ;;
  esac
}
for set in $SETS; do
  slice "$set" > "benchmarks/results/sets/$set.jsonl"
  out="benchmarks/results/$TAG-$set.json"
  summaries=()
  rec="benchmarks/results/summaries-$set.docs.jsonl"
  if [ -f "$rec" ] || [ -f "$rec.gz" ]; then summaries=(--summaries-from "$rec"); fi
  start=$(date +%s)
  # shellcheck disable=SC2086
  cos eval --data "benchmarks/results/sets/$set.jsonl" --local-model default \
    --methods "$METHODS" "${summaries[@]}" --answer-cache "$ANSWERS" ${EXTRA:-} --out "$out"
  echo "$set: $(( $(date +%s) - start )) s"
  # the first run's summaries are every later run's (the same index content)
  if [ ${#summaries[@]} -eq 0 ] && [ -f "$out.docs.jsonl" ]; then cp "$out.docs.jsonl" "$rec"; fi
done
