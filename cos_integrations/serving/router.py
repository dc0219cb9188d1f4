"""Where the summaries may answer, learned from the source under an error bound.

The summary path (the judge answering from the summary's sentences) is a cache in front
of the source chunks. Whether its answers can be trusted depends on the model behind it and
on the text, and no rule over one model's reply tells right from wrong well enough
(``benchmarks/token_ceiling.py``). So the retriever checks instead: on a share of the
questions the summary path would answer, the chunk path runs too (a *check*: the chunks'
answer is what is returned, never worse than reading them), and the two answers are
compared (:func:`~cos_integrations.serving.hit_rule.answers_agree`, any language). From
those outcomes the router bounds how often a served summary answer disagrees with the
source: the summary path serves only while the upper confidence bound of that rate is
within ``max_error`` (the user's bound, 2% by default); otherwise the question goes
straight to the chunks with no judge call, so the product reads no more than chunk RAG
plus the checks it needs.

Checks are many while the estimate is uncertain (a new index starts cautious: every
question the summary path would take is checked) and fall once the bound is clearly met
or clearly missed: to ``floor``, scaled by how far the estimate lies from the bound (the
upper bound's share of ``max_error`` when it is met, ``max_error``'s share of the lower
bound when it is missed), so exploration keeps falling as the estimate firms up and a
decision that more checks cannot change costs next to nothing. A question's sample is
decided by a hash of its text, so the same question decides the same way and a replay of
a run decides as it did (a smaller rate checks a subset of the questions a larger one did).

Examples:
    >>> router = Router(max_error=0.02)
    >>> router.mode("When is rent due?", checks=0, disagreements=0)
    'check'
    >>> router.mode("When is rent due?", checks=200, disagreements=0) in ("summary", "check")
    True
    >>> round(upper_bound(0, 200), 4), round(upper_bound(30, 100), 3)
    (0.0133, 0.38)
"""

from __future__ import annotations

import hashlib
import math
from typing import Literal

__all__ = [
    "Router",
    "RouteMode",
    "upper_bound",
    "lower_bound",
    "DEFAULT_MAX_ERROR",
    "CHECK_FLOOR",
    "CONFIDENCE_Z",
]

RouteMode = Literal["summary", "chunks", "check"]

# the share of served summary answers that may disagree with the source (the user's bound)
DEFAULT_MAX_ERROR = 0.02
# the share of questions still checked once the estimate is firm either way
CHECK_FLOOR = 0.05
# one-sided 95% confidence (Wilson score bounds)
CONFIDENCE_Z = 1.645


def _wilson(k: int, n: int, z: float) -> tuple[float, float]:
    """The Wilson score interval of a rate seen ``k`` times in ``n`` (``n`` > 0)."""
    p = k / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    return max(0.0, (centre - spread) / scale), min(1.0, (centre + spread) / scale)


def upper_bound(k: int, n: int, z: float = CONFIDENCE_Z) -> float:
    """The Wilson score upper bound of a rate seen ``k`` times in ``n`` (1.0 with none).

    Examples:
        >>> upper_bound(0, 0), round(upper_bound(1, 10), 3)
        (1.0, 0.348)
    """
    return _wilson(k, n, z)[1] if n > 0 else 1.0


def lower_bound(k: int, n: int, z: float = CONFIDENCE_Z) -> float:
    """The Wilson score lower bound of a rate seen ``k`` times in ``n`` (0.0 with none).

    Examples:
        >>> lower_bound(0, 10), round(lower_bound(3, 10), 3)
        (0.0, 0.127)
    """
    return _wilson(k, n, z)[0] if n > 0 else 0.0


def _share(text: str) -> float:
    """A stable number in [0, 1) for a question's text: its place in the sample."""
    digest = hashlib.sha256(" ".join(text.split()).casefold().encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class Router:
    """The decision for a question the summary path would take (see the module docstring):
    ``"summary"`` (the judge answers from the summary), ``"chunks"`` (no judge call: the
    source chunks) or ``"check"`` (both: the chunks' answer is returned, the summary's is
    compared with it and the outcome recorded).

    Examples:
        >>> router = Router(max_error=0.02, floor=0.05)
        >>> router.trusted(checks=150, disagreements=0), router.trusted(10, 3)
        (True, False)
        >>> round(router.check_rate(checks=10, disagreements=3), 4)  # clearly over the bound
        0.0079
        >>> round(router.check_rate(checks=150, disagreements=0), 3)  # clearly within it
        0.044
    """

    def __init__(self, max_error: float = DEFAULT_MAX_ERROR, floor: float = CHECK_FLOOR) -> None:
        if not 0.0 < max_error < 1.0:
            raise ValueError(f"max_error must be between 0 and 1, not {max_error}")
        if not 0.0 <= floor <= 1.0:
            raise ValueError(f"the check floor must be between 0 and 1, not {floor}")
        self.max_error = max_error
        self.floor = floor

    def trusted(self, checks: int, disagreements: int) -> bool:
        """Whether served summary answers stay within the bound (its upper confidence
        bound at most ``max_error``)."""
        return upper_bound(disagreements, checks) <= self.max_error

    def check_rate(self, checks: int, disagreements: int) -> float:
        """The share of questions checked: all of them while it is uncertain whether the
        bound is met; once the estimate is firm either way, ``floor`` scaled by how close
        the estimate's confidence bound lies to ``max_error`` (it falls as checks firm it
        up: 0 of 150 checks disagreeing, 4.4%; 0 of 600, 1.1%; 3 of 10, 0.8%)."""
        upper = upper_bound(disagreements, checks)
        if upper <= self.max_error:
            return self.floor * upper / self.max_error
        lower = lower_bound(disagreements, checks)
        if lower > self.max_error:
            return self.floor * self.max_error / lower
        return 1.0

    def mode(self, query: str, checks: int, disagreements: int) -> RouteMode:
        """The way for ``query``, given the outcomes so far."""
        if _share(query) < self.check_rate(checks, disagreements):
            return "check"
        return "summary" if self.trusted(checks, disagreements) else "chunks"
