"""The shift figures: ``/figures`` (a page with server-drawn charts) and ``/figures.csv``."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from controller.core.odds import exact_distribution
from controller.floor import shiftpage
from controller.floor.routes.common import console_of, page
from controller.floor.settings import zone_name


def figures_shown(request: Request) -> tuple[shiftpage.Shown, list[str]] | Response:
    """The figures a query asks for, with the tables it could name (one read of them);
    a 400 naming what is wrong in the query."""
    service = console_of(request).service
    names = service.store.table_names()
    try:
        asked = shiftpage.parse_query(
            list(request.query_params.multi_items()), shifts=service.settings.shifts,
            zone=service.settings.zone(), tables=names, now=datetime.now(UTC),
        )  # fmt: skip
    except shiftpage.BadQuery as exc:
        return PlainTextResponse(f"bad figures query: {exc}", status_code=400)
    return shiftpage.load(service.store, asked), names


def figures_page(request: Request) -> Response:
    found = figures_shown(request)
    if isinstance(found, Response):
        return found
    shown, names = found
    settings = console_of(request).service.settings
    asked = shown.asked
    rows = shown.tables if asked.table is not None else [*shown.tables, shown.floor]
    scope = shown.scope
    query = {k: v for k, v in request.query_params.items() if k != "table"}
    return page(
        request, "figures.html", asked=asked, shifts=settings.shifts,
        tables=names, rows=rows, scope=scope,
        shares=[Fraction(c, scope.hands) if scope.hands else None for c in scope.points],
        exact=exact_distribution(), charts=shiftpage.charts(shown),
        when=shiftpage.when(shown), zone=zone_name(settings.zone()),
        csv_url="/figures.csv?" + urlencode(request.query_params.multi_items()),
        table_url=lambda t: "/figures?" + urlencode({**query, "table": t}), live=None,
    )  # fmt: skip


def figures_csv(request: Request) -> Response:
    found = figures_shown(request)
    if isinstance(found, Response):
        return found
    shown, _ = found
    return Response(
        shiftpage.csv_text(shown),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{shiftpage.csv_name(shown)}"'},
    )


def routes() -> list[Route]:
    return [Route("/figures", figures_page), Route("/figures.csv", figures_csv)]
