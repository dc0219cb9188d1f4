"""Defaults chosen by measurement, in one place, in a module that imports nothing heavy
(the CLI reads them while it starts; ``cos --help`` must not load a model client).

The hit rule's defaults were chosen by measurement (BENCHMARKS.md): the judge reads the best
summary and its document's best chunk cut to the sentences on the query (``"focused"``;
cutting took the context tokens a question below plain top-2 chunk RAG's, 363 against 496
on 30 SQuAD chunks), and replies with a verbatim quote that must be in what it read (the
grounded decision, measured on four kinds of text in "Four kinds of text"). The threshold
is tuned to e5's cosine scores (median 0.83 for a question and its best summary): 0.84
saved context tokens but kept a refined summary from being asked at all in the quick start
(its similarity rose to 0.832), so refinement could not teach; 0.80 keeps it.

Examples:
    >>> from cos_integrations.defaults import DEFAULT_THRESHOLD, HIT_CONTEXTS
    >>> DEFAULT_THRESHOLD, HIT_CONTEXTS[-1]
    (0.8, 'focused')
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "EmbedderName",
    "PresetName",
    "Strategy",
    "Judge",
    "HitContext",
    "HIT_CONTEXTS",
    "DEFAULT_THRESHOLD",
    "DEFAULT_K",
    "DEFAULT_HIT_CONTEXT",
    "DEFAULT_SCORE_HIT_CONTEXT",
    "DEFAULT_ANSWER_SIMILARITY",
    "ANSWER_CHECK_SIMILARITY",
    "FOCUS_SENTENCES",
    "PRESET_NAMES",
    "PresetChoice",
    "DEFAULT_PRESET",
    "TIERED_SUMMARY_WORDS",
    "DeepenStrategy",
    "DEFAULT_DEEPEN_STRATEGY",
    "CALIBRATION_QUANTILE",
    "RefineTeach",
    "REFINE_TEACH",
    "DEFAULT_REFINE_TEACH",
    "DEFAULT_REFINE_RETARGET",
    "DEFAULT_REFINE_MIN_ASKS",
    "DEFAULT_SEMANTIC_THRESHOLD",
]

# who decides a hit: the similarity alone, or the model answering from the hit context
Judge = Literal["score", "llm"]
HitContext = Literal["summaries", "best+chunk", "focused"]
HIT_CONTEXTS: tuple[str, ...] = ("summaries", "best+chunk", "focused")
# the most sentences a "focused" hit context keeps (HitRule.focus_sentences; windows of two
# sentences ranked by the index's embedding, retrieval.focus_items)
FOCUS_SENTENCES = 4

DEFAULT_THRESHOLD = 0.80
# summaries searched, and source chunks a miss reads (unless fallback_k says otherwise), for
# every retriever (FallbackRetriever, both frameworks' retrievers, `cos query`, `cos eval`):
# the k of every figure in BENCHMARKS.md, and of `rag`, the row the product is measured
# against. LlamaIndex's own retrievers default to 2 as well (DEFAULT_SIMILARITY_TOP_K).
DEFAULT_K = 2
DEFAULT_HIT_CONTEXT: HitContext = "focused"  # with the model judge (judge="llm")
# With the similarity alone (judge="score": no model, a retriever given none): a hit returns
# the best summary and its document's best source chunk. Against the k summaries that clear
# the threshold (the default before 0.2) on the four sets of BENCHMARKS.md (`TAG=scorechunk
# EXTRA="--judge score --hit-context best+chunk" bash benchmarks/four_sets.sh`), F1 0.455 ->
# 0.665, 0.343 -> 0.650, 0.214 -> 0.316, 0.179 -> 0.568, paired 12 / 3, 17 / 3, 15 / 5,
# 17 / 1; "focused" won on encyclopedia text alone.
DEFAULT_SCORE_HIT_CONTEXT: HitContext = "best+chunk"
# hit_context="best" (the best summary alone) lost to the other reads with both judges on
# the four sets ("What the judge reads", "Without a model"): deprecated in 0.2, gone in 0.3
# HitRule.answer_similarity: a question at least this close (e5 cosine) to a verified
# answer's question is served that answer without a model call (serving/answers.py); each
# entry's own bar rises above any nearby verified question whose answer differs. Chosen on
# the development sets' pairs (benchmarks/answer_bar.py; BENCHMARKS.md, "Recurring traffic").
DEFAULT_ANSWER_SIMILARITY = 0.98
# Below that bar and from this similarity on, a reworded question goes the usual way (the
# router, the chunks) and the answer it gets from the source teaches the entry: another
# answer raises the entry's bar above that similarity. (Checking it against the entry's
# source sentence alone, one short call, served wrong answers: the 1.5B model reading only
# that sentence gives the entry's answer to whatever is asked; BENCHMARKS.md, "Recurring
# traffic".)
ANSWER_CHECK_SIMILARITY = 0.90

# A calibrated threshold (CoSIndex.calibrate_threshold) is this quantile of the known
# questions' similarity to their own summary: on the 30 SQuAD chunks' traffic questions
# with e5 it is 0.813, beside the hand-tuned 0.80; with the hashing embedder 0.125, where
# 0.80 would never ask the judge (BENCHMARKS.md).
CALIBRATION_QUANTILE = 0.25

# the names of CoSConfig's presets, for what each does (cos_integrations.summarize.config.PRESETS
# maps them to configs): "tiered" is CoSConfig() (what ships); "cos" runs the Chain of
# Summaries loop at ingest, "cos-fast" fewer rounds of it, "paper" the paper's best setting
PresetName = Literal["tiered", "cos", "cos-fast", "paper"]
PRESET_NAMES: tuple[str, ...] = get_args(PresetName)
# what the CLI's --preset accepts (0.2's old names "default" and "fast" went in 0.3: they
# are "cos" and "cos-fast")
PresetChoice = PresetName

# How a summary is made (CoSConfig.strategy; here so that the CLI lists the choices in
# --help without importing the config's dependencies)
Strategy = Literal["cos", "cos-draft", "cos-extract", "density", "zero-shot", "mini"]

# The embedders the CLI can build: the local e5 model, or the lexical hashing one
EmbedderName = Literal["e5", "hashing"]

# What `cos ingest`, both frameworks' transforms and a new CoSIndex summarise with: the
# tiered mode, a zero-shot summary of at most TIERED_SUMMARY_WORDS words at ingest (one
# call a document) and the Chain of Summaries rounds later, where traffic is (`cos refine
# --deepen`). Measured in the product (BENCHMARKS.md, "Chain of Summaries in the
# product"): on 8 SQuAD chunks (40 test questions, 1.5B model) fallback over 120-word
# zero-shot summaries scored F1 0.758 against 0.733 over the shipped CoS loop (200
# words, 8.2 calls and 183 s a document against 1 call and 38-54 s) and 0.697 for rag;
# at 200 words a zero-shot summary lost (0.658): its extra sentences made wrong hits.
# On 20 chunks (100 questions) today's loop at 120 words tied it (0.697 against 0.694)
# at 4.9x the ingest seconds; on all 30 the zero-shot default scored 0.712, rag 0.680.
DEFAULT_PRESET = "tiered"
TIERED_SUMMARY_WORDS = 120
# How the later tier's rounds teach (`cos refine --deepen`, Refiner.adeepen): the model's
# rewrites ("cos"), the paper's loop. In the same product run, at 200 words, fallback over
# CoS scored 0.733 against 0.708 over "cos-extract" (appended source sentences), 1 wrong
# hit of 11 against 2: within the noise of 40 questions, and no better for extraction.
DeepenStrategy = Literal["cos", "cos-extract"]
DEFAULT_DEEPEN_STRATEGY: DeepenStrategy = "cos"

# How a refinement round teaches a summary a missed query (Refiner(teach=)): append the
# source's own sentence that answers it ("extract"), the model's rewrite ("rewrite"), or
# the first, then the second ("both"). On 10 SQuAD chunks refined from traffic (1.5B),
# "extract" kept test F1 (0.699 before and after, no hit wrong) where "both" lost 0.033
# and the rewrite 0.041 to model-written facts the source does not state, at 2.4 calls a
# job against 3.8 and 4.4 (BENCHMARKS.md, "Refinement that teaches").
RefineTeach = Literal["extract", "rewrite", "both"]
REFINE_TEACH: tuple[str, ...] = ("extract", "rewrite", "both")
DEFAULT_REFINE_TEACH: RefineTeach = "extract"

# In how many documents a refine job looks for a missed query's answer (Refiner(retarget=)):
# its own (the fallback's top chunk's document), and, while the sources say nothing, the next
# documents of the collection's chunk ranking for the query, up to this many in all. On the
# 5 chunks of the run above, 3 of the 11 jobs found the query's answer only in the second or
# third document (all 3 hit when asked again), at 35 refine calls against 26 with 1. A job
# whose source's answer teaches its summary nothing goes on the same way (tiered-5-retry:
# one repeat and one test question moved from a sibling chunk to their own, 0.67 -> 1.0,
# none worse; 8.6 refine calls a document against 6.8).
DEFAULT_REFINE_RETARGET = 3

# A refine worker takes a job once its question missed this often: 2 refines only where a
# question came back and was not served a verified answer (a verified answer serves the
# repeats of the rest); 1 on every first miss. On the 200-ask SQuAD stream (BENCHMARKS.md
# "Refinement: only where it pays") 1 ran 181 jobs (143 rejected) at 294% of rag's prompt
# tokens for F1 0.665; 2 ran none, at 62% for 0.719: a job on every miss reads the whole
# source, more than the chunk call it follows, and buys nothing the router lets serve.
DEFAULT_REFINE_MIN_ASKS = 2

# The semantic cache users put in front of RAG serves an earlier answer from this question
# similarity on by default: RedisVL SemanticCache's distance_threshold of 0.1 (cosine). The
# `cos eval --stream` baseline (langchain_ext.caches) runs at it and at its best bar.
DEFAULT_SEMANTIC_THRESHOLD = 0.90
