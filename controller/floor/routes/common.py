"""What the console's routes share: the session cookie, who is asking, a page, a form."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from controller.floor.console import Console
from controller.floor.passwords import Sessions

COOKIE = "firebet_floor"
ALERT_ID = re.compile(r"[1-9][0-9]{0,18}")
MAX_ID = 2**63 - 1
"""The largest alert id the store holds; anything else in its place is answered 400."""


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def current_user(request: Request) -> str | None:
    """The surveillance user whose session cookie came with ``request`` (None: the pit)."""
    sessions: Sessions = request.app.state.sessions
    return sessions.user(request.cookies.get(COOKIE))


def page(request: Request, name: str, **context: Any) -> HTMLResponse:
    """A page rendered for whoever asks (a surveillance user, or the pit)."""
    return console_of(request).page(name, current_user(request), **context)


def same_origin(request: Request) -> bool:
    """A state-changing request must come from the console's own pages."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if not origin:
        return True  # not a browser (curl, tests); the session cookie still has to match
    return urlsplit(origin).netloc == request.headers.get("host", "")


def secure(request: Request) -> bool:
    """The cookie is Secure behind a TLS proxy and whenever the console speaks https."""
    return console_of(request).web.behind_tls_proxy or request.url.scheme == "https"


def alert_id(text: str) -> int | None:
    """The alert id in a URL (1 to 2^63-1, plain digits); None for anything else."""
    if not ALERT_ID.fullmatch(text):
        return None
    number = int(text)
    return number if number <= MAX_ID else None


def bad_alert_id(text: str) -> Response:
    shown = text if len(text) <= 40 else text[:40] + "..."
    return PlainTextResponse(
        f"alert id {shown!r} is not an alert number (1 to {MAX_ID})", status_code=400
    )


async def form(request: Request) -> dict[str, str]:
    """A posted form's fields (the first value of each; the body is bounded by BodyLimit)."""
    body = (await request.body()).decode("utf-8", errors="replace")
    return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}


MAX_PAGE = 999_999


def page_number(request: Request) -> int | Response:
    """The ``page`` a query asks for (1 when none); a 400 naming it when it is no page."""
    asked = request.query_params.get("page", "1")
    if not (asked.isascii() and asked.isdigit() and len(asked) <= 6 and int(asked) >= 1):
        shown = asked if len(asked) <= 20 else asked[:20] + "..."
        return PlainTextResponse(
            f"page: must be a page number 1 to {MAX_PAGE} (got {shown!r})", status_code=400
        )
    return int(asked)
