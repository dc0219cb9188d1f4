"""The grounded decision on text of every kind: the sentence splitter, the quote match and
the echo rule on German, Chinese, biomedical and narrative text (each failed on the lexical
checks of before 0.2: English abbreviations, stems, key-word lists), and a judge whose
reply is a quote not in what it read, or no JSON at all, is a miss, never an exception."""

import asyncio
import json
import logging

import pytest
from fakes import ScriptedFakeModel, make_document

from cos_integrations import ChainOfSummaries, CoSConfig, CoSIndex, HitRule
from cos_integrations.loaders import SourceDocument
from cos_integrations.serving.hit_rule import GroundedReply, grounding_checks, quoted_sentences
from cos_integrations.serving.retrieval import FallbackRetriever
from cos_integrations.text import quote_in, split_sentences


@pytest.mark.parametrize(
    "text, sentences",
    [
        # German: an abbreviation ("z. B.", "ca.") is not a sentence's end
        (
            "Der Rhein ist z. B. ein Fluss. Die Stadt hat ca. 300.000 Einwohner.",
            ["Der Rhein ist z. B. ein Fluss.", "Die Stadt hat ca. 300.000 Einwohner."],
        ),
        # Chinese: sentences end with 。 and no space follows
        ("北京是中国的首都。它有很多人口。", ["北京是中国的首都。", "它有很多人口。"]),
        # biomedical: "Fig. 2", "e.g." and "approx." do not end a sentence
        (
            "As shown in Fig. 2, SARS-CoV-2 binds ACE2, e.g. in the lung. The dose was "
            "approx. 5 mg. It worked.",
            [
                "As shown in Fig. 2, SARS-CoV-2 binds ACE2, e.g. in the lung.",
                "The dose was approx. 5 mg.",
                "It worked.",
            ],
        ),
        # narrative: a question in dialogue, then who asked it, is one sentence
        (
            '"Where are you going?" asked the fox. "Home," said the hen.',
            ['"Where are you going?" asked the fox.', '"Home," said the hen.'],
        ),
    ],
)
def test_sentences_in_any_language(text, sentences):
    assert split_sentences(text) == sentences


def test_a_quote_matches_as_written_in_any_script():
    assert quote_in("sars-cov-2 binds ACE2", "As shown, SARS-CoV-2 binds ACE2 in the lung.")
    assert quote_in("SARS CoV 2  binds\nACE2", "SARS-CoV-2 binds ACE2.")  # spacing, punctuation
    assert not quote_in("SARS-CoV-2 binds ACE-2 receptors", "SARS-CoV-2 binds ACE2.")
    assert quote_in("它有很多人口", "北京是中国的首都。它有很多人口。")
    assert quote_in("STRASSE", "Die Straße ist lang.")  # Unicode case folding
    assert not quote_in("", "anything") and not quote_in("...", "anything")
    # a small model's copy with a word changed or added still lines up; a made-up one not
    source = "The immune system detects agents, known as pathogens, and distinguishes them."
    assert quote_in(
        "The immune system detects agents, known as pathogens, and distinguish them", source
    )
    assert quote_in(
        "The immune system detects agents, known as pathogens, and then distinguishes them", source
    )
    assert not quote_in("The immune system ignores pathogens entirely", source)
    # the sentences a quote covers, whole: what refinement appends
    story = '"Where are you going?" asked the fox. "Home," said the hen. She ran.'
    assert quoted_sentences("said the hen. She", story) == ['"Home," said the hen.', "She ran."]


@pytest.mark.parametrize(
    "question, reply, context, failed",
    [
        # German, inflected: the answer is the river's own name, in the question -> echo
        (
            "Wie heißt der Rhein auf Niederländisch?",
            GroundedReply("Rhein", "Der Rhein fließt durch Köln"),
            "Der Rhein fließt durch Köln. Auf Niederländisch heißt er Rijn.",
            ["not_echo"],
        ),
        (
            "Wie heißt der Rhein auf Niederländisch?",
            GroundedReply("Rijn", "Auf Niederländisch heißt er Rijn"),
            "Der Rhein fließt durch Köln. Auf Niederländisch heißt er Rijn.",
            [],
        ),
        # Chinese: compared by character
        (
            "中国的首都是哪里？",
            GroundedReply("北京", "北京是中国的首都"),
            "北京是中国的首都。它有很多人口。",
            [],
        ),
        # biomedical: hyphens and case do not matter, digits do
        (
            "Which receptor does SARS-CoV-2 bind?",
            GroundedReply("ACE2", "sars-cov-2 binds ACE2"),
            "As shown in Fig. 2, SARS-CoV-2 binds ACE2, e.g. in the lung.",
            [],
        ),
        (
            "How many mg was the dose?",
            GroundedReply("50", "The dose was approx. 5 mg."),
            "The dose was approx. 5 mg. It worked.",
            ["in_quote"],
        ),
        # narrative: a clause answer inside a two-sentence quote
        (
            "Why did the hen run?",
            GroundedReply("she wanted to go home", "She ran. She wanted to go home."),
            "The fox came. She ran. She wanted to go home.",
            [],
        ),
        # a quote the context does not hold: made up, whatever the answer
        (
            "Why did the hen run?",
            GroundedReply("she was afraid", "She was afraid of the fox."),
            "The fox came. She ran. She wanted to go home.",
            ["quoted", "in_quote"],
        ),
    ],
)
def test_grounding_on_every_kind_of_text(question, reply, context, failed):
    checks = grounding_checks(reply, question, context)
    assert [name for name, ok in checks.items() if not ok] == failed


@pytest.fixture
def filled(tmp_path):
    from cos_integrations.embedded.embeddings import HashingEmbedder

    index = CoSIndex(tmp_path / "ix", embedder=HashingEmbedder(256))
    model = ScriptedFakeModel(thesis_facts=3)
    engine = ChainOfSummaries(model, CoSConfig.fast(iterations=0))
    docs = [
        SourceDocument(doc_id=t, text=make_document(8, topic=t), source=f"{t}.txt")
        for t in ("lease", "garden")
    ]
    asyncio.run(index.aingest(docs, engine))
    yield index, model
    index.store.close()


RULE = HitRule(judge="llm", threshold=0.0)


def test_a_judge_quoting_what_it_did_not_read_is_a_miss(filled):
    index, model = filled
    q = "What is the garden item 1?"
    assert FallbackRetriever(index, llm=model, rule=RULE, max_error=None).retrieve(q).hit
    model.script["grounded"] = ['{"quote": "The garden item 1 is value 9z.", "answer": "value 9z"}']
    # the hit rule alone: the first ask's verified answer would serve this one
    res = FallbackRetriever(
        index, llm=model, rule=RULE, refine_on_miss="off", answers=False, max_error=None
    ).retrieve(q)
    assert not res.hit and res.checks["quoted"] is False and res.judge_answer == "value 9z"
    assert "quoted" in res.reason and res.items  # answered from the source chunks instead


def test_a_reply_that_is_not_json_is_a_miss_with_a_logged_reason(filled, caplog):
    index, model = filled
    model.script["grounded"] = ["Sure! The garden item 1 is value 1b."]
    retriever = FallbackRetriever(index, llm=model, rule=RULE, refine_on_miss="off")
    with caplog.at_level(logging.INFO, logger="cos_integrations.serving.retrieval"):
        res = retriever.retrieve("What is the garden item 1?")
    assert not res.hit and res.judge_error == "not the JSON object of the schema"
    assert "unreadable" in res.reason and any("unreadable" in r.message for r in caplog.records)
    assert res.items and all(h.kind == "chunk" for h in res.items)
    # the judge was asked for the schema's structured output
    schemas = [
        s
        for (task, _), s in zip(model.calls, model.json_schemas, strict=True)
        if task == "grounded"
    ]
    assert schemas and all(s and s["name"] == "grounded_answer" for s in schemas)


def test_a_chinese_document_is_chunked_by_characters_like_words_elsewhere():
    """Chunk sizes count a character of a script written without spaces as a word: a
    Chinese document is several chunks of about the size asked for (it was one chunk,
    every sentence counting as one word), and one long run without a sentence end is cut
    into pieces, not kept whole; English and German counts are whitespace words as before."""
    from cos_integrations.sections import Section
    from cos_integrations.text import chunk_text, count_words

    sentence = "北京是中国的首都，也是一座历史悠久的城市。"  # 21 characters
    doc = sentence * 40
    chunks = chunk_text(doc, words=160, overlap=32)
    assert len(chunks) >= 5
    assert all(count_words(c) <= 160 for c in chunks)
    assert "".join(c.replace(" ", "") for c in chunks).count("北京") > 40  # overlap
    run = "很" * 500  # no sentence end at all
    pieces = chunk_text(run, words=160, overlap=32)
    assert len(pieces) == 4 and all(count_words(p) <= 160 for p in pieces)
    assert count_words("Die Miete ist am 1. fällig.") == 6
    assert Section(["标题"], "title", 2, sentence).words == 21  # was 1


def test_the_decision_reads_no_phrase_list_in_any_language():
    """Issue 57 item 4: a grounded reply answers only with a quote and an answer (the
    prompt's empty pair says the text is silent), whatever words a model says it with;
    "I don't know", the answer prompts' own word, is no answer."""
    from cos_integrations.serving.hit_rule import GroundedReply, said_nothing

    for silent in ("Nicht im Dokument", "文中没有提到", "ไม่มีข้อมูล", "I don't know", ""):
        assert not GroundedReply(silent, "").answered, silent
    assert GroundedReply("1990", "Es wurde 1990 gegründet.").answered
    assert GroundedReply("1990 年", "北京大学成立于 1990 年。").answered
    assert said_nothing("I don't know.") and not said_nothing("Ich weiß es nicht")


def test_a_german_source_that_is_silent_is_recorded_so(index):
    """A refine job whose model says in German, with no quote, that the document does not
    answer records the source silent (it was 'rejected' while "Nicht im Dokument" was not
    in the English phrase list)."""
    from cos_integrations.serving.refine import Refiner

    reply = json.dumps({"quote": "", "answer": "Nicht im Dokument"})
    model = ScriptedFakeModel(script={"source_answer": [reply]})
    engine = ChainOfSummaries(model, CoSConfig.fast(iterations=0))
    text = make_document(2, topic="miete") + " Die Miete ist am 5. fällig."
    doc = SourceDocument(doc_id="miete", text=text, title="Miete")
    asyncio.run(index.aingest([doc], engine))
    index.store.enqueue("miete", "Wer zahlt das Wasser?")
    [outcome] = Refiner(index, engine, retarget=1, min_asks=1).run_once()
    assert outcome.status == "not_in_source", outcome.reason
    assert index.store.not_in_source("miete", "Wer zahlt das Wasser?")


def test_question_keys_and_tokens_hold_in_any_language(index):
    """One question is one key in any language (full-width and ASCII marks alike; no
    English article dropped from a German question), and Thai text is compared character
    by character, not as one token."""
    from cos_integrations.text import question_key, quote_span, text_tokens, tokens_in

    store = index.store
    store.upsert_document("d", "北京是中国的首都。")
    job = store.enqueue("d", "北京是首都吗？")
    assert store.enqueue("d", "北京是首都吗?") == job
    german = store.enqueue("d", "Wo hängt das Bild an der Wand?")
    assert store.enqueue("d", "Wo hängt das Bild der Wand?") != german
    assert question_key("Wer ist der Präsident?") == "wer ist der präsident"
    thai = "เมืองหลวงของไทยคือกรุงเทพมหานคร"
    assert len(text_tokens("กรุงเทพมหานคร")) > 1
    assert tokens_in("กรุงเทพ", thai) and quote_span("คือกรุงเทพ", thai) is not None
