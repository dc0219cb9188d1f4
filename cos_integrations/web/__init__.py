"""The review web page (``cos ui``): what the cache says, why it changed, what users asked
that it could not answer, and the owners' controls. Needs the ``ui`` extra.

Examples:
    >>> from cos_integrations.web import create_app          # doctest: +SKIP
    >>> app = create_app(index, read_only=True)               # doctest: +SKIP
"""

from cos_integrations.web.app import PAGE_SIZE, USER_HEADER, create_app

__all__ = ["create_app", "PAGE_SIZE", "USER_HEADER"]
