"""Parsing of model output in all the shapes small models produce."""

import pytest

from cos_integrations.summarize.questions import (
    ParseError,
    QAPair,
    dedupe,
    parse_answers,
    parse_density,
    parse_mini,
    parse_qa_pairs,
    parse_summary,
    split_bank,
)


def test_json_pairs_inside_prose_and_fences():
    text = 'Sure!\n```json\n{"pairs": [{"question": "When?", "answer": "May"}]}\n```\nBye'
    assert [(p.question, p.answers) for p in parse_qa_pairs(text)] == [("When?", ["May"])]


def test_bare_json_list_and_alternative_keys():
    text = 'Output: [{"q": "Who?", "a": "Ann"}, {"question": "Cost?", "answer": 12}]'
    pairs = parse_qa_pairs(text)
    assert [(p.question, p.answers) for p in pairs] == [("Who?", ["Ann"]), ("Cost?", ["12"])]


def test_broken_json_falls_back_to_lines():
    text = '{"pairs": [{"question": "Who?", "answer": "A\nQ: Where?\nA: Rome'
    assert [(p.question, p.answers) for p in parse_qa_pairs(text)] == [("Where?", ["Rome"])]


def test_numbered_bold_lines_and_missing_answer():
    text = (
        "1. **Q:** Who signed?\n**A:** Bob\n2. Q: Orphan question?\n"
        "3. Question: Where?\nAnswer: Oslo"
    )
    pairs = [(p.question, p.answers[0]) for p in parse_qa_pairs(text)]
    assert pairs == [("Who signed?", "Bob"), ("Where?", "Oslo")]


@pytest.mark.parametrize("text", ["", "   ", "I cannot do that.", "{not json"])
def test_nothing_usable_raises_parse_error(text):
    with pytest.raises(ParseError):
        parse_qa_pairs(text)


def test_dedupe_by_normalised_question():
    a = QAPair(question="What is the Rent?", answers=["1"])
    b = QAPair(question="what is the rent", answers=["2"])
    c = QAPair(question="When?", answers=["3"])
    assert dedupe([a, b, c]) == [a, c]
    assert dedupe([c], seen=[c.key]) == []


def test_split_bank_sizes_and_determinism():
    pairs = [QAPair(question=f"Q{i}?", answers=["x"]) for i in range(15)]
    bank = split_bank(pairs, train=10, val=5, seed=1)
    assert [p.split for p in bank].count("train") == 10
    assert [p.split for p in bank].count("val") == 5
    assert split_bank(pairs, train=10, val=5, seed=1) == bank
    assert split_bank(pairs, train=10, val=5, seed=2) != bank


def test_split_bank_shrinks_in_proportion_and_keeps_given_splits():
    pairs = [QAPair(question=f"Q{i}?", answers=["x"]) for i in range(3)]
    bank = split_bank(pairs, train=10, val=5, seed=0)
    assert sorted(p.split for p in bank) == ["train", "train", "val"]
    fixed = QAPair(question="Fixed?", answers=["y"], split="val")
    assert fixed in split_bank([fixed], train=1, val=1)


def test_parse_answers_json_lines_and_missing():
    shuffled = '{"answers": [{"id": 2, "answer": "b"}, {"id": 1, "answer": "a"}]}'
    assert parse_answers(shuffled, 2) == ["a", "b"]
    assert parse_answers('["x", "y"]', 3) == ["x", "y", None]
    assert parse_answers("1. Paris\n2) I don't know\n", 3) == ["Paris", "I don't know", None]
    assert parse_answers("Just Paris", 1) == ["Just Paris"]
    with pytest.raises(ParseError):
        parse_answers("no numbers here", 2)


def test_parse_summary_variants():
    assert parse_summary("Updated Summary: Rent is due.") == "Rent is due."
    assert parse_summary("**Updated Summary:** Rent is due.") == "Rent is due."
    assert parse_summary("New sentences: Rent is due.") == "Rent is due."  # v4 rewrites
    assert parse_summary("```\nRent is due.\n```") == "Rent is due."
    assert parse_summary("<summary>\nRent\n</summary>") == "Rent"
    assert parse_summary("think\n####\nFinal text", draft=True) == "Final text"
    assert parse_summary("   ") == ""


def test_parse_density_and_mini():
    ents, s = parse_density("Missing Entities: NVIDIA; 47%\nSummary: NVIDIA grew 47%.")
    assert ents == ["NVIDIA", "47%"] and s == "NVIDIA grew 47%."
    assert parse_density("Missing Entities: none\nSummary: x") == ([], "x")
    assert parse_mini("Draft: a\nQuestions:\n- q\nFinal Summary: b c") == "b c"
    assert parse_mini("only text") == "only text"
