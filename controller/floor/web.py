"""The floor console: server-rendered pages and live updates by server-sent events.

Pages (Jinja2, rendered on the server, no front-end build): every table at a
glance with the alert queue (``/``), the whole alert list (``/alerts``) and one
table's recent hands (``/tables/<id>``). ``/events`` streams fragments of those
pages as the ingest thread stores new records; a few lines of inline script put
them in place. The pit reads without a login; confirming a surveillance alert or
clearing an integrity, audit or offline alert needs a surveillance login (users
and scrypt hashes in ``floor.toml``).

:func:`build_app` joins the routes (:mod:`controller.floor.routes`, one module per
job) to the renderer (:class:`controller.floor.console.Console`) under the body limit.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware

from controller.floor.console import Console
from controller.floor.guard import BodyLimit
from controller.floor.passwords import Sessions
from controller.floor.routes import actions, api, figures, pages, stream
from controller.floor.routes.login import Logins
from controller.floor.server import FloorService
from controller.floor.settings import WebSettings


def build_app(
    service: FloorService, users: dict[str, str], web: WebSettings | None = None
) -> Starlette:
    """The console's ASGI application."""
    web = web or WebSettings()
    console = Console(service, web)
    service.listen(console.on_changes)
    service.metrics.watch(service, console.stream_counts)
    logins = Logins(users, web)
    app = Starlette(
        routes=[
            *pages.routes(),
            *stream.routes(),
            *api.routes(),
            *figures.routes(),
            *logins.routes(),
            *actions.routes(),
        ],
        middleware=[Middleware(BodyLimit, max_bytes=web.max_body_bytes)],
    )
    app.state.sessions = Sessions()
    app.state.console = console
    app.state.logins = logins
    return app
