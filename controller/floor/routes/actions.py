"""Surveillance's actions on an alert: confirm a 5th point, clear with a note."""

from __future__ import annotations

import asyncio
import uuid

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from controller.floor.routes.common import (
    alert_id,
    bad_alert_id,
    console_of,
    current_user,
    form,
    same_origin,
)


async def act(request: Request, what: str) -> Response:
    """Confirm or clear the alert in the URL, as the logged-in user, on the ingest thread."""
    user = current_user(request)
    if user is None:
        return PlainTextResponse("surveillance login needed", status_code=401)
    if not same_origin(request):
        return PlainTextResponse("cross-site request refused", status_code=403)
    number = alert_id(request.path_params["alert"])
    if number is None:
        return bad_alert_id(request.path_params["alert"])
    fields = await form(request)
    service = console_of(request).service
    if what == "confirm":
        future = service.call(lambda: service.ingest.confirm(number, user, str(uuid.uuid4())))
    else:
        note, flood = fields.get("note", "")[:500], fields.get("flood") == "1"
        future = service.call(lambda: service.ingest.clear(number, user, note, flood=flood))
    try:
        await asyncio.wrap_future(future)
    except LookupError as exc:
        return PlainTextResponse(str(exc), status_code=404)
    except ValueError as exc:  # the table would refuse it: say why, send nothing
        return PlainTextResponse(str(exc), status_code=409)
    back = fields.get("back", "/")
    return RedirectResponse(
        back if back.startswith("/") and not back.startswith("//") else "/", status_code=303
    )


async def confirm(request: Request) -> Response:
    return await act(request, "confirm")


async def clear(request: Request) -> Response:
    return await act(request, "clear")


def routes() -> list[Route]:
    return [
        Route("/alerts/{alert}/confirm", confirm, methods=["POST"]),
        Route("/alerts/{alert}/clear", clear, methods=["POST"]),
    ]
