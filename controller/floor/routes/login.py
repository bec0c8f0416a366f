"""Surveillance's login and logout (scrypt hashes from ``floor.toml``, throttled)."""

from __future__ import annotations

import asyncio
import logging
import math
import secrets

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from controller.floor.guard import LoginThrottle
from controller.floor.passwords import Sessions, hash_password, verify_password
from controller.floor.routes.common import (
    COOKIE,
    current_user,
    form,
    page,
    same_origin,
    secure,
)
from controller.floor.settings import WebSettings

log = logging.getLogger("firebet.floor")

HASHING_AT_ONCE = 2
"""Password hashes computed at once (scrypt takes 16 MB each)."""


class Logins:
    """The login routes with the users they know and the throttle they keep."""

    def __init__(self, users: dict[str, str], web: WebSettings) -> None:
        self.users = users
        self.throttle = LoginThrottle(web)
        self._hashing = asyncio.Semaphore(HASHING_AT_ONCE)
        self._stand_in = hash_password(secrets.token_urlsafe(16))  # an unknown user costs the same

    def login_page(self, request: Request) -> Response:
        return page(request, "login.html", error=None, live=None)

    async def login(self, request: Request) -> Response:
        fields = await form(request)
        name, password = fields.get("user", "")[:200], fields.get("password", "")[:1024]
        client = request.client.host if request.client else "?"
        # a session already open for this user is never held off (another client failing
        # must not lock surveillance out); otherwise this client's own failures count
        wait = 0.0 if current_user(request) == name else self.throttle.wait_s(client, name)
        if wait > 0:
            seconds = math.ceil(wait)
            refused = page(
                request, "login.html", live=None,
                error=f"too many failed logins: try again in {seconds} s",
            )  # fmt: skip
            refused.status_code = 429
            refused.headers["Retry-After"] = str(seconds)
            return refused
        encoded = self.users.get(name)
        async with self._hashing:  # the same work for a name that is no user
            matched = await asyncio.to_thread(verify_password, password, encoded or self._stand_in)
        ok = encoded is not None and matched
        if not ok or not same_origin(request):
            self.throttle.failed(client, name)
            log.warning("failed surveillance login for %r from %s", name[:64], client)
            refused = page(request, "login.html", error="wrong user or password", live=None)
            refused.status_code = 401
            return refused
        self.throttle.succeeded(client, name)
        sessions: Sessions = request.app.state.sessions
        token = sessions.open(name)
        log.info("surveillance user %s logged in from %s", name, client)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=secure(request))
        return response

    async def logout(self, request: Request) -> Response:
        sessions: Sessions = request.app.state.sessions
        sessions.close(request.cookies.get(COOKIE))
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(COOKIE, httponly=True, samesite="strict", secure=secure(request))
        return response

    def routes(self) -> list[Route]:
        return [
            Route("/login", self.login_page, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"]),
        ]
