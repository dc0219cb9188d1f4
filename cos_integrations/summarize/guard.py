"""Checks on a summary before it is published: faithfulness and injected instructions.

Faithfulness (the Chain of Density article's verification check): every number and every
capitalised name in the summary must occur in the source, after normalisation. A summary
that repeats an instruction aimed at the model ("ignore previous instructions") is flagged.

Examples:
    >>> faithfulness_flags("Rent is 900 euros, due to Alice.", "Rent: 900 euros. Pay Alice.")
    []
    >>> faithfulness_flags("Rent is 950 euros.", "Rent: 900 euros.")
    ['number not in source: 950']
"""

from __future__ import annotations

import re

__all__ = ["faithfulness_flags", "injection_flags", "summary_flags", "unfaithful_spans"]

_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
_NAME = re.compile(r"(?<![.!?:]\s)(?<!^)\b[A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*")
_INJECTION = re.compile(
    r"ignore (?:all |any )?(?:the )?(?:previous|prior|above|earlier) (?:instructions|prompts?)"
    r"|disregard (?:all |the )?(?:previous|prior|above) |you are now |system prompt",
    re.I,
)


def _norm_number(s: str) -> str:
    return re.sub(r"[.,](?=\d{3}\b)", "", s).strip(".,")


def unfaithful_spans(summary: str, source: str) -> list[tuple[int, int, str]]:
    """Where ``summary`` states a number or a capitalised name that ``source`` does not:
    ``(start, end, kind)`` character spans (``kind``: ``number`` or ``name``), in order."""
    spans: list[tuple[int, int, str]] = []
    src_numbers = {_norm_number(n) for n in _NUMBER.findall(source)}
    src_words = set(re.findall(r"[a-z0-9]+", source.lower()))
    for m in _NUMBER.finditer(summary):
        if _norm_number(m.group(0)) not in src_numbers:
            spans.append((m.start(), m.end(), "number"))
    for m in _NAME.finditer(summary):
        words = re.findall(r"[a-z0-9]+", m.group(0).lower())
        if words and not all(w in src_words for w in words):
            spans.append((m.start(), m.end(), "name"))
    spans.sort()
    kept: list[tuple[int, int, str]] = []
    for span in spans:  # a number inside a flagged name: keep the outer span
        if kept and span[0] < kept[-1][1]:
            continue
        kept.append(span)
    return kept


def faithfulness_flags(summary: str, source: str) -> list[str]:
    """Numbers and capitalised names in ``summary`` that do not occur in ``source``."""
    spans = unfaithful_spans(summary, source)
    flags: list[str] = []
    for kind in ("number", "name"):
        texts = [summary[a:b] for a, b, k in spans if k == kind]
        flags += [f"{kind} not in source: {t}" for t in dict.fromkeys(texts)]
    return flags


def injection_flags(summary: str) -> list[str]:
    """Flags for instructions aimed at a model that a summary should never carry."""
    return [f"instruction in summary: {m.group(0)!r}" for m in _INJECTION.finditer(summary)]


def summary_flags(summary: str, source: str) -> list[str]:
    """All flags for a summary of ``source``."""
    return faithfulness_flags(summary, source) + injection_flags(summary)
