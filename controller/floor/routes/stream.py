"""``/events``: a page's live stream (server-sent events), bounded per reader."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from controller.floor.guard import ABORT, STREAMING
from controller.floor.routes.common import console_of, current_user

KEEPALIVE_S = 15.0


async def events(request: Request) -> Response:
    console = console_of(request)
    sub = console.subscribe(
        (request.query_params.get("table") or "")[:64] or None,
        current_user(request),
        request.scope.get("extensions", {}).get(ABORT),
    )
    if sub is None:
        return PlainTextResponse(
            f"the pit's {console.web.max_streams} live streams are all open (web.max_streams); "
            "reload later, or log in", status_code=503, headers={"Retry-After": "30"},
        )  # fmt: skip
    streaming = request.scope.get("extensions", {}).get(STREAMING)
    if streaming is not None:
        streaming()

    async def stream() -> AsyncIterator[bytes]:
        try:
            yield b"retry: 1000\n\n" + await asyncio.to_thread(console.snapshot, sub.table)
            last = time.monotonic()
            while not console.closing:
                try:
                    data = await asyncio.wait_for(sub.queue.get(), timeout=1.0)
                except TimeoutError:
                    if await request.is_disconnected():
                        return
                    if time.monotonic() - last >= KEEPALIVE_S:
                        last = time.monotonic()
                        yield b": keepalive\n\n"
                    continue
                if data is None:
                    return
                sub.queued_bytes -= len(data)
                last = time.monotonic()
                yield data
        finally:
            console.unsubscribe(sub)

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def routes() -> list[Route]:
    return [Route("/events", events)]
