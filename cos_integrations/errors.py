"""Typed errors of cos-integrations."""

from __future__ import annotations

__all__ = ["CoSError", "CoSModelError", "CoSOutputError"]


class CoSError(Exception):
    """Base class of every error this library raises on purpose.

    Examples:
        >>> issubclass(CoSModelError, CoSError) and issubclass(CoSOutputError, CoSError)
        True
    """


class CoSModelError(CoSError):
    """The model failed after retries (HTTP error, timeout, refused connection).

    Carries the document id (when known), the last HTTP status (``None`` for timeouts and
    connection errors) and the number of attempts. Never carries an API key.

    Examples:
        >>> err = CoSModelError("model qwen failed: HTTP 503", status=503, attempts=5)
        >>> str(err.with_doc_id("lease.md"))
        'model qwen failed: HTTP 503 (document lease.md); last status 503, attempts 5'
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        doc_id: str | None = None,
        attempts: int = 1,
    ) -> None:
        self.status = status
        self.doc_id = doc_id
        self.attempts = attempts
        self.message = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = f" (document {self.doc_id})" if self.doc_id else ""
        return f"{self.message}{where}; last status {self.status}, attempts {self.attempts}"

    def with_doc_id(self, doc_id: str | None) -> CoSModelError:
        """Return this error with ``doc_id`` filled in (the model does not know documents)."""
        self.doc_id = doc_id
        self.args = (self._render(),)
        return self


class CoSOutputError(CoSError):
    """The model kept returning output that cannot be used (for example an empty summary).

    Examples:
        >>> err = CoSOutputError("empty summary", raw_output="", doc_id="lease.md")
        >>> str(err)
        'empty summary (document lease.md)'
    """

    def __init__(self, message: str, *, raw_output: str = "", doc_id: str | None = None):
        self.raw_output = raw_output
        self.doc_id = doc_id
        super().__init__(message + (f" (document {doc_id})" if doc_id else ""))
