"""The Chain of Summaries engine: thesis, antithesis, synthesis, repeated (paper §3).

One round costs at most two calls however many questions there are: one rewrite, and one
call that answers *all* questions from the new summary. See :class:`ChainOfSummaries`.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from cos_integrations.defaults import DEFAULT_DEEPEN_STRATEGY, DeepenStrategy
from cos_integrations.errors import CoSError, CoSModelError, CoSOutputError
from cos_integrations.metrics import is_unanswered, normalize_answer, squad_f1
from cos_integrations.model import ChatModel
from cos_integrations.serving.hit_rule import supporting_sentence
from cos_integrations.summarize.config import CoSConfig
from cos_integrations.summarize.prompts import (
    ANSWERS_SCHEMA,
    QUESTIONS_SCHEMA,
    answer_messages,
    density_messages,
    merge_messages,
    merged_source,
    mini_messages,
    questions_messages,
    restate_messages,
    rewrite_messages,
    thesis_messages,
)
from cos_integrations.summarize.questions import (
    ParseError,
    QAPair,
    dedupe,
    describes_document,
    parse_answers,
    parse_density,
    parse_mini,
    parse_qa_pairs,
    parse_summary,
    split_bank,
)
from cos_integrations.summarize.result import CoSResult, IterationRecord, QuestionScore
from cos_integrations.sync import run_sync
from cos_integrations.text import (
    TokenCounter,
    complete_sentences,
    count_words,
    estimate_tokens,
    split_sections,
)
from cos_integrations.usage import Usage

__all__ = [
    "ChainOfSummaries",
    "ModelRun",
    "Evaluation",
    "PROMPT_OVERHEAD_TOKENS",
    "select_iteration",
    "extract_answers",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

# Room for instructions, the current summary and the questions in a prompt that carries the
# source: what is left of the context window for the source itself is
# :attr:`ChainOfSummaries.source_budget` (used by the engine and by refinement alike).
PROMPT_OVERHEAD_TOKENS = 900


@dataclass
class ModelRun:
    """The model calls made for one document, and what they cost (usage and warnings).

    Every step of the engine (and refinement, and the evaluation's reference procedure)
    goes through :meth:`call`, which wraps adapter errors in :class:`CoSModelError` with
    the document id and adds each call's usage.

    Examples:
        >>> run = ModelRun(llm, CoSConfig(), "doc-1")                 # doctest: +SKIP
        >>> text = await run.call([{"role": "user", "content": "Hi"}])  # doctest: +SKIP
        >>> run.usage.calls                                            # doctest: +SKIP
        1
    """

    llm: ChatModel
    config: CoSConfig
    doc_id: str | None
    usage: Usage = field(default_factory=Usage)
    warnings: list[str] = field(default_factory=list)
    # the same usage split by call type (thesis, questions, answers, rewrite, ...): what
    # each step costs, for the throughput work
    by_task: dict[str, Usage] = field(default_factory=dict)

    async def call(
        self,
        messages: list[dict[str, str]],
        *,
        json_schema: dict | None = None,
        max_tokens: int | None = None,
        task: str = "other",
    ) -> str:
        try:
            result = await self.llm.chat(
                messages,
                max_tokens=max_tokens or self.config.max_output_tokens,
                temperature=self.config.temperature,
                json_schema=json_schema,
            )
        except CoSModelError as exc:
            raise exc.with_doc_id(self.doc_id) from exc
        except CoSError:
            raise
        except Exception as exc:  # an adapter's own error: typed, with the document id
            raise CoSModelError(
                f"model call failed: {type(exc).__name__}: {str(exc)[:200]}", doc_id=self.doc_id
            ) from exc
        self.usage.add(result.usage)
        self.by_task.setdefault(task, Usage()).add(result.usage)
        return result.text or ""

    async def call_until(
        self,
        messages: list[dict[str, str]],
        parse: Callable[[str], T],
        **call: Any,
    ) -> tuple[T | None, str]:
        """The one retry policy for a reply that does not parse: ask again, up to
        ``parse_retries`` more times, until ``parse(reply)`` gives a value (a
        :class:`ParseError` or an empty value is a failed try). Returns ``(value, reply)``,
        ``value`` ``None`` when no try parsed. (Transport errors are retried below, in the
        model client.)"""
        raw = ""
        for attempt in range(self.config.parse_retries + 1):
            raw = await self.call(messages, **call)
            try:
                value = parse(raw)
            except ParseError:
                value = None
            if value:
                return value, raw
            if attempt < self.config.parse_retries:
                log.debug("document %s: unparseable reply, asking again", self.doc_id)
        return None, raw

    def warn(self, message: str) -> None:
        where = f"document {self.doc_id}: " if self.doc_id else ""
        log.warning("%s%s", where, message)
        self.warnings.append(message)


@dataclass
class Evaluation:
    """A summary's answers to a question bank: per-question scores, and the mean F1 of the
    refinement (``train``) and validation (``val``) questions (``None`` when there are none).

    Examples:
        >>> ev = await engine.evaluate(summary, bank, run)   # doctest: +SKIP
        >>> ev.answered("When is rent due?"), ev.val          # doctest: +SKIP
    """

    scores: list[QuestionScore]
    train: float | None
    val: float | None
    # the model's reply when it could not be parsed (then there are no scores)
    raw_output: str | None = None

    @property
    def parsed(self) -> bool:
        """Whether the model's answers could be read (else ``raw_output`` holds its reply)."""
        return self.raw_output is None

    def answered(self, question: str) -> bool:
        return any(s.answered for s in self.scores if s.question == question)

    @property
    def selection(self) -> float:
        """What best-iteration selection compares: validation, else refinement score."""
        return self.val if self.val is not None else (self.train or 0.0)


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


class ChainOfSummaries:
    """Summarise documents with Chain of Summaries (or a baseline strategy).

    Examples:
        >>> from cos_integrations import ChainOfSummaries, CoSConfig, OpenAIChatModel
        >>> llm = OpenAIChatModel(base_url="http://127.0.0.1:8080/v1")   # doctest: +SKIP
        >>> cos = ChainOfSummaries(llm, CoSConfig.paper())                # doctest: +SKIP
        >>> result = cos.summarize("Rent is due on the 5th. ...")        # doctest: +SKIP
        >>> result.summary, result.best_iteration, result.usage.calls    # doctest: +SKIP

    Async: ``await cos.asummarize(text)`` and ``await cos.asummarize_many(texts,
    concurrency=8)``. Human-written questions: ``cos.summarize(text, questions=[QAPair(...)])``.
    Without ``config`` it summarises as the product ships (``CoSConfig()``: one zero-shot
    summary, the loop's rounds later through :meth:`adeepen`); ``CoSConfig.cos()`` runs the
    loop at once.
    """

    def __init__(
        self,
        llm: ChatModel,
        config: CoSConfig | None = None,
        *,
        token_counter: TokenCounter | None = None,
        section_concurrency: int = 2,
    ) -> None:
        if not hasattr(llm, "chat"):
            raise TypeError(f"llm must implement ChatModel.chat(), got {type(llm).__name__}")
        self.llm = llm
        self.config = config or CoSConfig()
        # the counter given, else the model's own (an embedded server's tokenizer), else
        # the character estimate
        self.count_tokens: TokenCounter = (
            token_counter or getattr(llm, "token_counter", None) or estimate_tokens
        )
        self.section_concurrency = section_concurrency

    # ----------------------------------------------------------------- public API
    def summarize(
        self, text: str, *, questions: Sequence[QAPair] | None = None, doc_id: str | None = None
    ) -> CoSResult:
        """Sync wrapper of :meth:`asummarize`."""
        return run_sync(self.asummarize(text, questions=questions, doc_id=doc_id))

    def summarize_many(self, texts: Sequence[str], **kwargs: object) -> list:
        """Sync wrapper of :meth:`asummarize_many`."""
        return run_sync(self.asummarize_many(texts, **kwargs))  # type: ignore[arg-type]

    async def asummarize(
        self, text: str, *, questions: Sequence[QAPair] | None = None, doc_id: str | None = None
    ) -> CoSResult:
        """Summarise one document.

        Raises ``TypeError`` for a non-``str``, ``ValueError`` for empty text,
        :class:`CoSModelError` when the model fails after retries, and
        :class:`CoSOutputError` when it never produces a usable first summary.
        """
        name = doc_id or "<text>"
        if not isinstance(text, str):
            raise TypeError(f"document {name}: expected str, got {type(text).__name__}")
        if not text.strip():
            raise ValueError(f"document {name} is empty or whitespace only")
        human = [
            q if q.origin == "human" else q.model_copy(update={"origin": "human"})
            for q in (questions or [])
        ]
        run = ModelRun(self.llm, self.config, doc_id)
        return await self._finish(self._dispatch(text, run, human), run, text, doc_id)

    async def adeepen(
        self,
        text: str,
        summary: str,
        *,
        questions: Sequence[QAPair] = (),
        doc_id: str | None = None,
        strategy: DeepenStrategy = DEFAULT_DEEPEN_STRATEGY,
    ) -> CoSResult:
        """Chain of Summaries rounds on a summary that already exists (the tiered mode: a
        zero-shot summary at ingest, the rounds later, for documents that get traffic).

        A question bank is generated from ``text`` and ``questions`` (e.g. the queries the
        summary missed) join it as refinement questions; ``summary`` is iteration 0 and the
        rounds (``strategy``: appended source sentences, or the model's rewrites) keep the
        iteration that scores best on validation, so ``result.best_iteration == 0`` means
        no round beat ``summary``. Documents longer than one prompt are not deepened
        (``ValueError``): their question bank would not fit.

        Examples:
            >>> cos = ChainOfSummaries(llm, CoSConfig())                    # doctest: +SKIP
            >>> r = await cos.adeepen(text, zero_shot_summary)              # doctest: +SKIP
            >>> r.best_iteration > 0 and r.summary                          # doctest: +SKIP
        """
        if strategy not in ("cos", "cos-extract"):
            raise ValueError(f"strategy must be 'cos' or 'cos-extract', not {strategy!r}")
        if not summary.strip():
            raise ValueError(f"document {doc_id or '<text>'}: no summary to deepen")
        if self.count_tokens(text) > self.source_budget:
            raise ValueError(
                f"document {doc_id or '<text>'} is longer than one prompt "
                f"({self.source_budget} tokens): not deepened"
            )
        run = ModelRun(self.llm, self.config, doc_id)

        async def rounds() -> CoSResult:
            bank = await self._question_bank(text, run, [])
            known = {q.key for q in bank}
            extra = [
                q.model_copy(update={"split": "train"}) for q in questions if q.key not in known
            ]
            return await self._refine(
                text,
                summary,
                bank + extra,
                run,
                strategy=strategy,
                draft=False,
                extract=strategy == "cos-extract",
            )

        return await self._finish(rounds(), run, text, doc_id)

    async def _finish(
        self, work: Awaitable[CoSResult], run: ModelRun, text: str, doc_id: str | None
    ) -> CoSResult:
        """Await ``work`` and fill in what every result carries (usage, tokens, hash)."""
        try:
            result = await work
        except Exception as exc:
            exc.usage = run.usage  # type: ignore[attr-defined]  # what the failed run cost
            raise
        result.doc_id = doc_id
        result.usage = run.usage
        result.usage_by_task = run.by_task
        result.warnings = run.warnings + result.warnings
        result.source_tokens = self.count_tokens(text)
        result.summary_tokens = self.count_tokens(result.summary)
        result.config_hash = self.config.config_hash()
        return result

    async def asummarize_many(
        self,
        texts: Sequence[str],
        *,
        concurrency: int = 4,
        doc_ids: Sequence[str] | None = None,
        questions: Sequence[Sequence[QAPair] | None] | None = None,
        return_exceptions: bool = False,
        on_result: Callable[[int, CoSResult | BaseException], None] | None = None,
    ) -> list:
        """Summarise many documents, at most ``concurrency`` at a time, in input order.

        With ``return_exceptions=True`` a failed document's slot holds its exception and the
        others still finish; ``on_result(i, result_or_error)`` is called as each one ends
        (for progress bars and for storing results as they arrive).
        """
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if doc_ids is not None and len(doc_ids) != len(texts):
            raise ValueError("doc_ids must have one id per text")
        sem = asyncio.Semaphore(concurrency)

        async def one(i: int) -> CoSResult:
            async with sem:
                try:
                    res = await self.asummarize(
                        texts[i],
                        questions=questions[i] if questions else None,
                        doc_id=doc_ids[i] if doc_ids else None,
                    )
                except BaseException as exc:
                    if on_result:
                        on_result(i, exc)
                    raise
                if on_result:
                    on_result(i, res)
                return res

        return await asyncio.gather(
            *(one(i) for i in range(len(texts))), return_exceptions=return_exceptions
        )

    # ----------------------------------------------------------------- strategies
    async def _dispatch(self, text: str, run: ModelRun, human: list[QAPair]) -> CoSResult:
        cfg = self.config
        budget = self.source_budget
        if self.count_tokens(text) > budget:
            return await self._long(text, run, human, budget)
        if cfg.strategy == "zero-shot":
            return await self._zero_shot(text, run)
        if cfg.strategy == "mini":
            return await self._mini(text, run)
        if cfg.strategy == "density":
            return await self._density(text, run)
        return await self._cos(text, run, human, strategy=cfg.strategy)

    async def _zero_shot(self, text: str, run: ModelRun) -> CoSResult:
        summary = await self._thesis(text, run)
        it = IterationRecord(index=0, kind="zero-shot", summary=summary)
        return CoSResult(
            strategy="zero-shot",
            summary=summary,
            best_iteration=0,
            iterations=[it],
            stop_reason="single call",
        )

    async def _mini(self, text: str, run: ModelRun) -> CoSResult:
        cfg = self.config
        msgs = mini_messages(text, words=cfg.max_summary_words, questions=cfg.mini_questions)
        summary, raw = await run.call_until(msgs, parse_mini, task="mini")
        if not summary:
            raise CoSOutputError("mini-CoS returned no summary", raw_output=raw, doc_id=run.doc_id)
        return CoSResult(
            strategy="mini",
            summary=summary,
            best_iteration=0,
            iterations=[IterationRecord(index=0, kind="mini", summary=summary)],
            stop_reason="single call",
        )

    async def _density(self, text: str, run: ModelRun) -> CoSResult:
        cfg = self.config
        words = min(cfg.max_summary_words, 100) if cfg.max_summary_words >= 60 else 60
        iterations: list[IterationRecord] = []
        current: str | None = None
        best = -1
        for index in range(cfg.density_rounds):
            raw = await run.call(density_messages(text, current, words=words), task="density")
            entities, summary = parse_density(raw)
            if not summary:
                run.warn(f"density round {index}: no summary in the reply; round skipped")
                iterations.append(
                    IterationRecord(
                        index=index, kind="density", summary="", failed=True, raw_output=raw
                    )
                )
                continue
            iterations.append(
                IterationRecord(
                    index=index, kind="density", summary=summary, missing_entities=entities
                )
            )
            current, best = summary, index
            if index > 0 and not entities:
                break  # the model found nothing missing: saturated
        if current is None:
            raise CoSOutputError(
                "density strategy produced no summary",
                raw_output=iterations[-1].raw_output or "",
                doc_id=run.doc_id,
            )
        return CoSResult(
            strategy="density",
            summary=current,
            best_iteration=best,
            iterations=iterations,
            stop_reason="density rounds done",
        )

    async def _thesis(self, text: str, run: ModelRun) -> str:
        msgs = thesis_messages(text, words=self.config.max_summary_words)
        summary, raw = await run.call_until(
            msgs,
            lambda reply: complete_sentences(parse_summary(reply)),
            max_tokens=_summary_tokens(self.config),
            task="thesis",
        )
        if not summary:
            raise CoSOutputError(
                "the model returned an empty summary", raw_output=raw, doc_id=run.doc_id
            )
        return await self._facts_not_description(msgs, raw, summary, run)

    async def _facts_not_description(
        self, msgs: list[dict[str, str]], raw: str, summary: str, run: ModelRun
    ) -> str:
        """A summary that describes the document ("The document provides an overview of
        ...") is asked once more, in the same conversation, to state the facts instead."""
        if not describes_document(summary):
            return summary
        again = await run.call(
            restate_messages(msgs, raw), max_tokens=_summary_tokens(self.config), task="restate"
        )
        restated = complete_sentences(parse_summary(again))
        if restated and not describes_document(restated):
            return restated
        run.warn("the summary describes the document instead of stating its facts")
        return restated or summary

    # ----------------------------------------------------------------- CoS proper
    async def _cos(
        self, text: str, run: ModelRun, human: list[QAPair], *, strategy: str
    ) -> CoSResult:
        thesis = await self._thesis(text, run)
        bank = await self._question_bank(text, run, human)
        return await self._refine(
            text,
            thesis,
            bank,
            run,
            strategy=strategy,
            draft=strategy == "cos-draft",
            extract=strategy == "cos-extract",
        )

    async def _question_bank(self, text: str, run: ModelRun, human: list[QAPair]) -> list[QAPair]:
        cfg = self.config
        bank: list[QAPair] = []
        if human:
            bank = split_bank(
                dedupe(human),
                train=cfg.train_questions,
                val=cfg.val_questions,
                seed=cfg.seed,
                keep_all=True,
            )
            if cfg.human_questions == "replace":
                return bank
        need = cfg.train_questions + cfg.val_questions
        pairs: list[QAPair] = []
        seen = [p.key for p in bank]
        for attempt in range(cfg.parse_retries + 1):
            if len(pairs) >= need:
                break
            msgs = questions_messages(
                text, count=need - len(pairs), focus=cfg.focus, avoid=[p.question for p in pairs]
            )
            raw = await run.call(
                msgs,
                json_schema=QUESTIONS_SCHEMA,
                max_tokens=min(cfg.max_output_tokens, 60 * (need - len(pairs)) + 48),
                task="questions",
            )
            try:
                fresh = parse_qa_pairs(raw)
            except ParseError:
                run.warn(f"question generation attempt {attempt + 1}: unparseable output")
                continue
            fresh = [p for p in fresh if not _refusal(p)]
            pairs = dedupe(pairs + fresh, seen=seen)
        if len(pairs) < need:
            run.warn(f"asked for {need} questions, got {len(pairs)} usable ones")
        synthetic = split_bank(
            pairs[:need], train=cfg.train_questions, val=cfg.val_questions, seed=cfg.seed
        )
        return bank + synthetic

    @property
    def source_budget(self) -> int:
        """Tokens of source that fit one prompt beside the instructions, a summary and the
        questions; a longer document is summarised section by section."""
        cfg = self.config
        return cfg.context_tokens - cfg.max_output_tokens - PROMPT_OVERHEAD_TOKENS

    async def evaluate(self, summary: str, bank: list[QAPair], run: ModelRun) -> Evaluation:
        """Answer every question of ``bank`` from ``summary`` in one call and score the
        answers (SQuAD F1 against each question's answers); when the reply cannot be parsed
        after ``parse_retries`` more tries, an evaluation with no scores whose
        ``raw_output`` holds it (``parsed`` is False)."""
        questions = [q.question for q in bank]
        parsed, raw = await run.call_until(
            answer_messages(summary, questions),
            # a one-element tuple: an empty list of answers is still a parsed reply
            lambda reply: (parse_answers(reply, len(questions)),),
            json_schema=ANSWERS_SCHEMA,
            max_tokens=min(self.config.max_output_tokens, 32 * len(questions) + 48),
            task="answers",
        )
        if parsed is None:
            return Evaluation(scores=[], train=None, val=None, raw_output=raw)
        scores = []
        for q, a in zip(bank, parsed[0], strict=True):
            f1 = squad_f1(a or "", q.answers)
            scores.append(
                QuestionScore(
                    question=q.question,
                    split=q.split,
                    answer=a,
                    f1=f1,
                    answered=f1 >= self.config.f1_threshold,
                )
            )
        return Evaluation(
            scores=scores,
            train=_mean([s.f1 for s in scores if s.split == "train"]),
            val=_mean([s.f1 for s in scores if s.split == "val"]),
        )

    def rewrite_prompt(
        self,
        source: str,
        current: str,
        questions: Sequence[str],
        *,
        draft: bool = False,
        answers: Sequence[str] | None = None,
    ) -> list[dict[str, str]]:
        """The synthesis prompt: rewrite ``current`` from ``source`` so that it answers
        ``questions`` (with their ``answers`` when the source is a merge of summaries)."""
        return rewrite_messages(
            source,
            current,
            list(questions),
            words=self.config.max_summary_words,
            draft=draft,
            answers=list(answers) if answers is not None else None,
        )

    async def rewrite(
        self, messages: list[dict[str, str]], current: str, run: ModelRun, *, draft: bool = False
    ) -> tuple[str, str]:
        """One synthesis step: ask ``messages`` (see :meth:`rewrite_prompt`) until a
        reply parses (``parse_retries`` more tries), drop a sentence cut by the token cap,
        and append the new sentences to ``current`` (a reply that re-wrote the whole
        summary replaces it). Returns ``(summary, raw reply)``; the summary is empty when
        no reply parsed."""
        new, raw = await run.call_until(
            messages,
            lambda reply: complete_sentences(parse_summary(reply, draft=draft)),
            # drafts need room for the thinking steps before the summary
            max_tokens=None if draft else _rewrite_tokens(self.config, current, self),
            task="rewrite",
        )
        return (_keep_or_append(current, new), raw) if new else ("", raw)

    async def _refine(
        self,
        source: str,
        thesis: str,
        bank: list[QAPair],
        run: ModelRun,
        *,
        strategy: str,
        draft: bool,
        kind: str = "thesis",
        with_answers: bool = False,
        extract: bool = False,
    ) -> CoSResult:
        """The evaluate/rewrite loop shared by whole documents and merged long documents.

        ``extract`` (strategy ``"cos-extract"``): a round's synthesis appends the source's
        own sentences that answer the chosen failed questions
        (:func:`~cos_integrations.serving.hit_rule.supporting_sentence`) instead of asking the model
        for a rewrite, so a round costs one call (the evaluation) and adds no text the
        source does not state."""
        cfg = self.config
        result = CoSResult(strategy=strategy, summary=thesis, best_iteration=0, questions=bank)
        first = IterationRecord(index=0, kind=kind, summary=thesis)  # type: ignore[arg-type]
        result.iterations.append(first)
        if not bank:
            run.warn("no questions to test the summary with: returning the first summary")
            result.stop_reason = "no questions"
            return result
        ev = await self.evaluate(thesis, bank, run)
        if not ev.parsed:
            run.warn("could not parse the answers to the first summary; returning it unscored")
            first.failed, first.raw_output = True, ev.raw_output
            result.stop_reason = "unparseable evaluation"
            return result
        _record(first, ev)
        current, current_ev = thesis, ev
        best_selection = ev.selection
        train = [q for q in bank if q.split == "train"]
        uses = {q.question: 0 for q in train}
        stale = 0
        result.stop_reason = "iterations done"
        for index in range(1, cfg.iterations + 1):
            chosen, why = self._antithesis(train, current_ev, uses, stale)
            if not chosen:
                result.stop_reason = why
                break
            record = IterationRecord(
                index=index, kind="rewrite", summary="", questions_used=[q.question for q in chosen]
            )
            result.iterations.append(record)
            ev = await self._round(
                record,
                source,
                (current, current_ev),
                chosen,
                bank,
                run,
                draft=draft,
                with_answers=with_answers,
                extract=extract,
            )
            if ev is not None and record.accepted:
                current, current_ev = record.summary, ev
            if ev is not None and ev.selection > best_selection:
                best_selection, stale = ev.selection, 0
            else:
                stale += 1
        best = select_iteration(result.iterations)
        result.best_iteration, result.summary = best.index, best.summary
        return result

    async def _round(
        self,
        record: IterationRecord,
        source: str,
        current: tuple[str, Evaluation],
        chosen: list[QAPair],
        bank: list[QAPair],
        run: ModelRun,
        *,
        draft: bool,
        with_answers: bool,
        extract: bool,
    ) -> Evaluation | None:
        """One round into ``record``: the synthesis covering ``chosen`` and its evaluation
        on ``bank``; ``None`` when the round left nothing to build on (no rewrite, the same
        text, unparseable answers). A rewrite scoring worse than ``current`` is recorded as
        not accepted (the keep-better rule: never built on)."""
        summary, current_ev = current
        new, raw = await self._synthesis(
            source, summary, chosen, run, draft=draft, with_answers=with_answers, extract=extract
        )
        if not new:
            run.warn(
                f"round {record.index}: no source sentence answers the chosen questions; "
                "keeping the previous summary"
                if extract
                else f"round {record.index}: the rewrite was empty; keeping the previous summary"
            )
            record.failed, record.raw_output, record.accepted = True, raw, False
            return None
        record.summary = new
        if " ".join(new.split()) == " ".join(summary.split()):
            # The model kept the summary as it was: scoring it again would only measure
            # sampling noise, so it inherits the scores and counts as a round without gain.
            _record(record, current_ev)
            record.accepted = False
            return None
        ev = await self.evaluate(new, bank, run)
        if not ev.parsed:
            run.warn(f"round {record.index}: unparseable answers; the rewrite is not used")
            record.failed, record.raw_output, record.accepted = True, ev.raw_output, False
            return None
        _record(record, ev)
        record.accepted = ev.selection >= current_ev.selection
        return ev

    def _antithesis(
        self,
        train: list[QAPair],
        current: Evaluation,
        uses: dict[str, int],
        stale: int,
    ) -> tuple[list[QAPair], str]:
        """The refinement questions the next round works on (the least used of those the
        summary fails, ``questions_per_iteration`` of them), or none and why the loop
        stops."""
        cfg = self.config
        unanswered = [q for q in train if not current.answered(q.question)]
        if not unanswered:
            # nothing to rewrite: the summary cannot change any more
            return [], "all refinement questions answered"
        if stale >= cfg.patience and all(uses[q.question] for q in unanswered):
            return [], f"no validation gain for {stale} rounds"
        chosen = sorted(unanswered, key=lambda q: uses[q.question])[: cfg.questions_per_iteration]
        for q in chosen:
            uses[q.question] += 1
        return chosen, ""

    async def _synthesis(
        self,
        source: str,
        current: str,
        chosen: list[QAPair],
        run: ModelRun,
        *,
        draft: bool,
        with_answers: bool,
        extract: bool,
    ) -> tuple[str, str]:
        """The next summary (empty when none) and the model's raw output: the source's own
        sentences appended (``extract``), or a rewrite covering the chosen questions."""
        if extract:
            return extract_answers(source, current, chosen), ""
        msgs = self.rewrite_prompt(
            source,
            current,
            [q.question for q in chosen],
            draft=draft,
            answers=[q.answers[0] for q in chosen] if with_answers else None,
        )
        return await self.rewrite(msgs, current, run, draft=draft)

    # ----------------------------------------------------------------- long documents
    async def _long(self, text: str, run: ModelRun, human: list[QAPair], budget: int) -> CoSResult:
        """A document longer than the context: each section summarised (and tested) on its
        own, the summaries merged level by level into one, then that merged summary
        refined against every section's questions and the human ones."""
        cfg = self.config
        sections = split_sections(text, budget, self.count_tokens)
        log.info("document %s: %d sections of at most %d tokens", run.doc_id, len(sections), budget)
        parts = await self._sections(sections, run)
        summaries = [p.summary for p in parts]
        # Merge level by level until the section summaries fit in one prompt.
        while self.count_tokens(merged_source(summaries)) > budget and len(summaries) > 1:
            groups = _group(summaries, budget, self.count_tokens)
            summaries = [await self._merge(g, run) for g in groups]
        merged = await self._merge(summaries, run)
        human_bank = (
            split_bank(
                dedupe(human),
                train=cfg.train_questions,
                val=cfg.val_questions,
                seed=cfg.seed,
                keep_all=True,
            )
            if human
            else []
        )
        bank = dedupe([q for p in parts for q in p.questions] + human_bank)
        if cfg.strategy in ("cos", "cos-draft", "cos-extract"):
            extract = cfg.strategy == "cos-extract"
            result = await self._refine(
                # extraction appends the document's own sentences, not the sections' summaries'
                text if extract else merged_source(summaries),
                merged,
                bank,
                run,
                strategy=cfg.strategy,
                draft=cfg.strategy == "cos-draft",
                kind="merge",
                with_answers=True,
                extract=extract,
            )
        else:
            result = CoSResult(
                strategy=cfg.strategy,
                summary=merged,
                best_iteration=0,
                iterations=[IterationRecord(index=0, kind="merge", summary=merged)],
                questions=bank,
                stop_reason="merged",
            )
        result.sections = parts
        return result

    async def _sections(self, sections: list[str], run: ModelRun) -> list[CoSResult]:
        """Each section summarised by this engine's strategy with a per-section share of
        the questions (``section_concurrency`` at a time); their usage and warnings are
        charged to ``run``."""
        cfg, k = self.config, len(sections)
        section_cfg = cfg.model_copy(
            update={
                "train_questions": math.ceil(cfg.train_questions / k) if cfg.train_questions else 0,
                "val_questions": math.ceil(cfg.val_questions / k) if cfg.val_questions else 0,
                "max_summary_words": max(60, cfg.max_summary_words),
                "context_tokens": 10**9,  # sections already fit
            }
        )
        section_engine = ChainOfSummaries(self.llm, section_cfg, token_counter=self.count_tokens)
        sem = asyncio.Semaphore(self.section_concurrency)

        async def one(i: int, section: str) -> CoSResult:
            async with sem:
                sub = ModelRun(self.llm, section_cfg, f"{run.doc_id or 'doc'}#section{i + 1}")
                res = await section_engine._dispatch(section, sub, [])
                run.usage.add(sub.usage)
                for task, used in sub.by_task.items():
                    run.by_task.setdefault(task, Usage()).add(used)
                run.warnings.extend(f"section {i + 1}: {w}" for w in sub.warnings)
                res.usage = sub.usage
                return res

        return list(await asyncio.gather(*(one(i, s) for i, s in enumerate(sections))))

    async def _merge(self, summaries: list[str], run: ModelRun) -> str:
        msgs = merge_messages(summaries, words=self.config.max_summary_words)
        merged, raw = await run.call_until(msgs, parse_summary, task="merge")
        if not merged:
            raise CoSOutputError(
                "merging section summaries returned nothing", raw_output=raw, doc_id=run.doc_id
            )
        return await self._facts_not_description(msgs, raw, merged, run)


def _summary_tokens(cfg: CoSConfig) -> int:
    """A hard cap for summary calls: small models ignore "at most N words"."""
    return min(cfg.max_output_tokens, int(cfg.max_summary_words * 1.6) + 40)


def _keep_or_append(current: str, new: str) -> str:
    """The rewrite prompt asks for the new sentences only, which are appended. A model that
    re-wrote the whole summary anyway replaces it: its reply opens as the summary does, or
    it is longer than the summary and keeps half of its words."""
    old = normalize_answer(current).split()
    if not old:
        return new
    fresh = normalize_answer(new).split()
    opening = old[: min(8, len(old))]
    kept = len(set(old) & set(fresh)) / len(set(old))
    whole = fresh[: len(opening)] == opening or (kept >= 0.5 and len(fresh) > len(old))
    return new if whole else f"{current.rstrip()} {new.lstrip()}"


def _rewrite_tokens(cfg: CoSConfig, current: str, engine: ChainOfSummaries) -> int:
    """Room for the current summary plus the new facts: a rewrite of a summary that is
    already over budget must not be cut before the facts it was asked to add."""
    wanted = max(_summary_tokens(cfg), int(engine.count_tokens(current) * 1.2) + 80)
    return min(cfg.max_output_tokens, wanted)


def extract_answers(source: str, current: str, questions: Sequence[QAPair]) -> str:
    """``current`` with the source's own sentence answering each of ``questions`` appended
    (the one holding the question's answer and the most of its words), skipping
    sentences the summary already holds; ``""`` when no question has such a sentence.

    Examples:
        >>> src = "Rent is due on the 5th. Pets need written consent."
        >>> q = QAPair(question="What do pets need?", answers=["written consent"])
        >>> extract_answers(src, "Rent is due on the 5th.", [q])
        'Rent is due on the 5th. Pets need written consent.'
    """
    have = normalize_answer(current)
    added: list[str] = []
    for q in questions:
        for answer in q.answers:
            sentence = supporting_sentence(answer, q.question, source)
            if sentence and normalize_answer(sentence) not in have and sentence not in added:
                added.append(" ".join(sentence.split()))
                break
    if not added:
        return ""
    return " ".join([current.rstrip(), *added])


def _refusal(pair: QAPair) -> bool:
    return all(is_unanswered(a) for a in pair.answers)


def _record(record: IterationRecord, ev: Evaluation) -> None:
    record.scores, record.train_score, record.val_score = ev.scores, ev.train, ev.val


def select_iteration(iterations: list[IterationRecord]) -> IterationRecord:
    """Best validation score (refinement score when there is no validation set); ties go to
    the better refinement score, then the shorter summary, then the earlier one. Failed and
    rejected rewrites never win.

    With 3-5 validation questions ties are common (0.0 against 0.0); the refinement score is
    the next evidence, measured on other questions. Replaying the recorded iterations of the
    SQuAD and long-document runs (``benchmarks/selection_rules.py``) put this tie-break ahead
    of "ties go to the shorter" on held-out human questions."""

    def score(it: IterationRecord) -> float:
        if it.val_score is not None:
            return it.val_score
        return it.train_score or 0.0

    candidates = [it for it in iterations if not it.failed and it.accepted and it.summary]
    if not candidates:
        return iterations[0]
    return max(
        candidates,
        key=lambda it: (score(it), it.train_score or 0.0, -count_words(it.summary), -it.index),
    )


def _group(summaries: list[str], budget: int, count: TokenCounter) -> list[list[str]]:
    groups: list[list[str]] = [[]]
    for s in summaries:
        if groups[-1] and count(merged_source(groups[-1] + [s])) > budget:
            groups.append([])
        groups[-1].append(s)
    if len(groups) == 1 and len(groups[0]) > 1:  # never loop forever on one oversize group
        half = len(groups[0]) // 2
        groups = [groups[0][:half], groups[0][half:]]
    return groups
