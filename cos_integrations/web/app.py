"""The review page: a FastAPI app over an index's store and Chroma collections.

Pages render on the server (Jinja2, autoescaped; no script at all, a strict Content
Security Policy, every asset in the package). Every action calls
:mod:`cos_integrations.serving.oversight`, as the ``cos`` CLI does, so the two never disagree;
this module only parses forms, checks the request and renders.

The pages (:data:`pages`) and the actions (:data:`actions`, each behind the CSRF check) are
``APIRouter`` s whose routes take one dependency, :class:`Review`: the index the app was
built over, its settings, and the request's user, renderer and refusals.

Request checks, in order: the access token when one is set (``Authorization: Bearer T``,
or the cookie that ``/?token=T`` sets; compared in constant time on every request), then
for a POST the read-only switch and the CSRF token (a random per-browser cookie that every
form repeats; SameSite=Strict). Who acts: the ``X-Cos-User`` header (from an
authenticating proxy), else the app's ``user``, else :func:`oversight.default_user`.

Examples:
    >>> from cos_integrations.web import create_app                  # doctest: +SKIP
    >>> app = create_app(CoSIndex("index"), read_only=True)           # doctest: +SKIP
    >>> # uvicorn.run(app, host="127.0.0.1", port=8765)
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, unquote, urlencode

import jinja2
from fastapi import APIRouter, Depends, FastAPI, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from cos_integrations.serving import oversight
from cos_integrations.serving.index import CoSIndex
from cos_integrations.serving.stats import compute_stats
from cos_integrations.storage.store import OVERVIEW_FILTERS, OVERVIEW_SORTS
from cos_integrations.web.plots import line_svg

__all__ = ["create_app", "PAGE_SIZE", "USER_HEADER", "Review", "pages", "actions"]

PAGE_SIZE = 50
USER_HEADER = "X-Cos-User"
_CSRF_COOKIE = "cos_csrf"
_TOKEN_COOKIE = "cos_token"
_FLASH_COOKIE = "cos_flash"
_HERE = Path(__file__).parent
_CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else ""


@dataclass(frozen=True)
class ReviewSettings:
    """What :func:`create_app` was given, kept in ``app.state.review``."""

    index: CoSIndex
    templates: Jinja2Templates
    read_only: bool = False
    token: str | None = None
    user: str | None = None


class Review:
    """The one dependency of every page and action: the index the app serves, and this
    request's user, page renderer and refusals.

    Examples:
        >>> @pages.get("/count")                                          # doctest: +SKIP
        ... def count(review: ReviewDep):
        ...     return {"documents": len(review.store.documents())}
    """

    def __init__(self, request: Request) -> None:
        self.request = request
        self.settings: ReviewSettings = request.app.state.review
        self.index = self.settings.index
        self.store = self.index.store

    @property
    def user(self) -> str:
        """Who acts: the authenticating proxy's header, else the app's user, else the
        login name."""
        return (
            self.request.headers.get(USER_HEADER) or self.settings.user or oversight.default_user()
        )

    def render(self, name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        """A page, with the flash message of the last action (read once)."""
        flash = unquote(self.request.cookies.get(_FLASH_COOKIE, "")) or None
        resp = self.settings.templates.TemplateResponse(
            self.request,
            name,
            {
                "csrf": self.request.state.csrf,
                "read_only": self.settings.read_only,
                "flash": flash,
                "index_path": str(self.index.path),
                "user": self.user,
                **ctx,
            },
            status_code=status,
        )
        if flash:
            resp.delete_cookie(_FLASH_COOKIE)
        return resp

    def refuse(self, status: int, message: str, back: str = "/") -> HTMLResponse:
        """The refusal page: what was refused and why; nothing changed."""
        return _refusal(self.settings.templates, self.request, status, message, back=back)

    def act(self, doc_id: str, fn: Callable[[], Any], message: str) -> Response:
        """Run one action; refused or unknown: the document page says why, nothing
        changed; done: back to the document with ``message``."""
        try:
            fn()
        except oversight.ActionRefused as exc:
            return self.refuse(409, str(exc), back=doc_url(doc_id))
        except KeyError as exc:
            return self.refuse(404, str(exc.args[0]))
        resp = RedirectResponse(doc_url(doc_id), status_code=303)
        resp.set_cookie(_FLASH_COOKIE, quote(message), httponly=True, samesite="strict")
        return resp


def doc_url(doc_id: str) -> str:
    """A document's page."""
    return "/doc/" + quote(doc_id, safe="")


def _version_of(raw: str) -> int | None:
    return int(raw) if raw.strip() else None


async def _csrf_checked(request: Request) -> None:
    """Every action: the form repeats this browser's CSRF cookie (the form is read here
    once; the route's own form fields read the same parsed form)."""
    form = await request.form()
    sent = str(form.get("csrf", ""))
    cookie = request.cookies.get(_CSRF_COOKIE, "")
    if not (cookie and hmac.compare_digest(sent.encode(), cookie.encode())):
        raise _Refused(
            403,
            "The form's CSRF token does not match this browser's: reload the page and "
            "submit again. Nothing was changed.",
        )


ReviewDep = Annotated[Review, Depends(Review)]
pages = APIRouter()
actions = APIRouter(prefix="/actions", dependencies=[Depends(_csrf_checked)])


@pages.get("/", response_class=HTMLResponse)
def overview(review: ReviewDep, sort: str = "id", filter: str = "all", page: int = 1):
    if sort not in OVERVIEW_SORTS or filter not in OVERVIEW_FILTERS:
        return review.refuse(
            400,
            f"sort must be one of {', '.join(OVERVIEW_SORTS)}; "
            f"filter one of {', '.join(OVERVIEW_FILTERS)}.",
        )
    page = max(page, 1)
    store = review.store
    rows, total = store.document_rows(
        sort=sort, where=filter, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE
    )
    stats = compute_stats(store)
    days = list(stats.per_day)
    rate = [(d, h / t if t else 0.0) for d, (h, t) in stats.per_day.items()]
    saved, run = [], 0
    for d in days:
        run += stats.saved_per_day.get(d, 0)
        saved.append((d, float(run)))
    return review.render(
        "overview.html",
        rows=rows,
        total=total,
        page=page,
        pages=max(1, -(-total // PAGE_SIZE)),
        sort=sort,
        filter=filter,
        sorts=list(OVERVIEW_SORTS),
        filters=list(OVERVIEW_FILTERS),
        stats=stats,
        jobs=store.job_counts(),
        dead=store.jobs("dead")[:PAGE_SIZE],
        rate_svg=line_svg(rate, label="hit rate per day", percent=True),
        saved_svg=line_svg(saved, label="context tokens saved, cumulative"),
    )


@pages.get("/doc/{doc_id:path}", response_class=HTMLResponse)
def document(review: ReviewDep, doc_id: str, a: int | None = None, b: int | None = None):
    try:
        view = oversight.document_view(review.index, doc_id)
    except KeyError as exc:
        return review.refuse(404, str(exc.args[0]))
    texts = {v.version: v.text for v in view.versions}
    cur = view.current.version if view.current else None
    if b is None:
        b = cur
    if a is None and b is not None:
        a = max((v for v in texts if v < b), default=None)
    diff = (
        oversight.word_diff(texts[a], texts[b])
        if a in texts and b in texts and a is not None and b is not None
        else None
    )
    return review.render(
        "document.html",
        view=view,
        doc_url=doc_url(doc_id),
        summary=oversight.highlight_spans(view.current.text, view.spans) if view.current else [],
        diff=diff,
        a=a,
        b=b,
    )


@pages.get("/misses", response_class=HTMLResponse)
def misses(review: ReviewDep, page: int = 1):
    page = max(page, 1)
    rows, total = oversight.recent_misses(review.index, PAGE_SIZE, (page - 1) * PAGE_SIZE)
    return review.render(
        "misses.html",
        rows=rows,
        total=total,
        page=page,
        pages=max(1, -(-total // PAGE_SIZE)),
        doc_url=doc_url,
    )


@actions.post("/pin")
def pin(
    review: ReviewDep,
    doc_id: str = Form(...),
    text: str = Form(...),
    expected_version: str = Form(""),
    reason: str = Form(""),
):
    return review.act(
        doc_id,
        lambda: oversight.pin_summary(
            review.index,
            doc_id,
            text,
            expected_version=_version_of(expected_version),
            user=review.user,
            reason=reason.strip() or "edited on the review page",
        ),
        f"{doc_id}: your summary is pinned (the new version is current).",
    )


@actions.post("/unpin")
def unpin(review: ReviewDep, doc_id: str = Form(...)):
    return review.act(
        doc_id,
        lambda: oversight.unpin(review.index, doc_id, user=review.user),
        f"{doc_id}: unpinned; refinement may publish new versions again.",
    )


def _move_current(path: str, move: Callable[..., Any], said: str) -> Callable[..., Any]:
    """A route that makes a document's version ``version`` current (``oversight.revert`` or
    ``oversight.accept``), a compare-and-swap on the version the owner saw."""

    @actions.post(path)
    def route(
        review: ReviewDep,
        doc_id: str = Form(...),
        version: int = Form(...),
        expected_version: str = Form(""),
    ):
        return review.act(
            doc_id,
            lambda: move(
                review.index,
                doc_id,
                version,
                user=review.user,
                expected_version=_version_of(expected_version),
            ),
            said.format(doc_id=doc_id, version=version),
        )

    return route


revert = _move_current("/revert", oversight.revert, "{doc_id}: reverted to v{version}.")
accept = _move_current("/accept", oversight.accept, "{doc_id}: accepted v{version}.")


@actions.post("/reject")
def reject(review: ReviewDep, doc_id: str = Form(...), version: int = Form(...)):
    return review.act(
        doc_id,
        lambda: oversight.reject(review.index, doc_id, version, user=review.user),
        f"{doc_id}: rejected v{version}.",
    )


@actions.post("/enqueue")
def enqueue(review: ReviewDep, doc_id: str = Form(...), question: str = Form(...)):
    return review.act(
        doc_id,
        lambda: oversight.enqueue_question(review.index, doc_id, question, user=review.user),
        f"{doc_id}: your question is queued for refinement (run `cos refine`).",
    )


@actions.post("/job")
def job(review: ReviewDep, job_id: int = Form(...), verb: str = Form(...)):
    found = review.store.job(job_id)
    if found is None or verb not in ("retry", "drop"):
        return review.refuse(404, f"no refine job {job_id} to {verb}")
    fn = oversight.retry_job if verb == "retry" else oversight.drop_job
    return review.act(
        found.doc_id,
        lambda: fn(review.index, job_id, user=review.user),
        f"job {job_id}: {'queued again' if verb == 'retry' else 'dropped'}.",
    )


async def _guard(request: Request, call_next):
    """The access token, the read-only switch, the CSRF cookie and the security headers,
    on every request."""
    settings: ReviewSettings = request.app.state.review
    token = settings.token
    if token is not None:
        given = request.query_params.get("token")
        if given is not None and hmac.compare_digest(given.encode(), token.encode()):
            # log in: keep the token in a cookie, drop it from the address bar
            params = {k: v for k, v in request.query_params.items() if k != "token"}
            target = request.url.path + (f"?{urlencode(params)}" if params else "")
            resp: Response = RedirectResponse(target, status_code=303)
            resp.set_cookie(_TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return resp
        auth = request.headers.get("authorization", "")
        bearer = auth[7:] if auth.lower().startswith("bearer ") else ""
        cookie = request.cookies.get(_TOKEN_COOKIE, "")
        ok = hmac.compare_digest(bearer.encode(), token.encode()) or hmac.compare_digest(
            cookie.encode(), token.encode()
        )
        if not ok:
            return HTMLResponse(
                "<!doctype html><title>cos review: token needed</title>"
                "<p>This review page needs its access token: open it as "
                "<code>/?token=...</code> or send <code>Authorization: Bearer ...</code>.",
                status_code=401,
                headers={"Content-Security-Policy": _CSP},
            )
    csrf = request.cookies.get(_CSRF_COOKIE)
    fresh = None
    if not csrf:
        csrf = fresh = secrets.token_urlsafe(32)
    request.state.csrf = csrf
    if request.method == "POST" and settings.read_only:
        return _refusal(settings.templates, request, 403, "This review page is read-only.")
    resp = await call_next(request)
    if fresh:
        resp.set_cookie(_CSRF_COOKIE, fresh, httponly=True, samesite="strict")
    resp.headers["Content-Security-Policy"] = _CSP
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Referrer-Policy"] = "no-referrer"
    return resp


def create_app(
    index: CoSIndex,
    *,
    read_only: bool = False,
    token: str | None = None,
    user: str | None = None,
    allowed_hosts: list[str] | None = None,
) -> FastAPI:
    """The review app over ``index``. ``token``: required on every request when set;
    ``read_only``: no action is served (forms are not shown; a POST gets 403); ``user``:
    who acts when the request does not say (``X-Cos-User``); ``allowed_hosts``: the
    ``Host`` headers served (``cos ui`` on loopback passes the loopback names, so a page
    on another site that re-binds its DNS name to 127.0.0.1 is refused)."""
    app = FastAPI(title="cos review", docs_url=None, redoc_url=None, openapi_url=None)
    if allowed_hosts:
        from starlette.middleware.trustedhost import TrustedHostMiddleware

        app.add_middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE / "templates"),
        autoescape=True,  # every template: document and summary text is untrusted
        undefined=jinja2.StrictUndefined,
    )
    env.filters["when"] = _when
    env.filters["q"] = lambda s: quote(str(s), safe="")
    templates = Jinja2Templates(env=env)
    app.state.review = ReviewSettings(index, templates, read_only, token, user)
    app.mount("/static", StaticFiles(directory=_HERE / "static"), name="static")
    app.middleware("http")(_guard)

    @app.exception_handler(_Refused)
    async def refused(request: Request, exc: _Refused):
        return _refusal(templates, request, exc.status, exc.message)

    app.include_router(pages)
    app.include_router(actions)
    return app


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _refusal(
    templates: Jinja2Templates, request: Request, status: int, message: str, back: str = "/"
) -> HTMLResponse:
    return templates.TemplateResponse(
        request,
        "refused.html",
        {"message": message, "back": back, "status": status},
        status_code=status,
        headers={"Content-Security-Policy": _CSP},
    )
