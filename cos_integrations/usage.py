"""Token and call accounting."""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["Usage"]


class Usage(BaseModel):
    """Calls and tokens, as reported by the API's ``usage`` fields.

    Examples:
        >>> u = Usage(calls=1, prompt_tokens=10)
        >>> u.add(Usage(calls=1, prompt_tokens=5, cached_tokens=4)).prompt_tokens
        15
    """

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    def add(self, other: Usage) -> Usage:
        """Add ``other`` into this object in place and return it."""
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        return self
