"""The floor console in a real browser (the distribution's headless Chromium, driven by
Playwright): a 5th point reaches the alert queue live, surveillance confirms it and the
table reports it; a table goes offline; a gap is filled by a resend; the shift figures
and their charts (the screenshot of docs/floor.md: ``FIREBET_SCREENSHOTS=docs/images``)."""

from __future__ import annotations

import csv
import io
import os
import shutil
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from controller.core.commands import Confirm
from controller.core.times import iso, to_ms
from controller.floor.passwords import hash_password
from tests.broker import Mosquitto
from tests.floor_support import FloorProcess, Publisher, TableJournal, make_points
from tests.support import wait_for

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
PASSWORD = "correct horse battery"
WAIT_MS = 30_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def floor(tmp_path: Path, mosquitto: Mosquitto) -> Iterator[FloorProcess]:
    f = FloorProcess(tmp_path / "floor", mosquitto, users={"alice": hash_password(PASSWORD)})
    try:
        yield f
    finally:
        f.stop()


@pytest.fixture
def page(browser: Any, floor: FloorProcess) -> Iterator[Any]:
    context = browser.new_context()
    p = context.new_page()
    p.set_default_timeout(WAIT_MS)
    p.goto(floor.url + "/")
    p.wait_for_selector("#live:text('live')")
    p.evaluate("window.sameDocument = true")  # gone if the page reloads
    try:
        yield p
    finally:
        context.close()


def row(page: Any, table: str) -> Any:
    return page.locator(f'tr[data-table="{table}"]')


def test_the_fifth_point_is_confirmed_from_the_queue_and_the_table_reports_it(
    tmp_path: Path, mosquitto: Mosquitto, floor: FloorProcess, page: Any
) -> None:
    journal = TableJournal(tmp_path / "table.db", table="CR-07")
    table = Publisher(mosquitto, "CR-07")
    try:
        journal.do("bet 3 5", "bet 7 2", *make_points(4, 5, 6, 8))
        table.publish(journal.records())
        row(page, "CR-07").locator(".points:has-text('(4)')").wait_for()
        assert page.locator('#alerts [data-kind="surveillance"]').count() == 0
        table.publish(journal.do(*make_points(9)))
        alert = page.locator('#alerts [data-kind="surveillance"][data-table="CR-07"]')
        alert.wait_for()
        text = alert.inner_text()
        assert "hand 1: 5 different points (4, 5, 6, 8, 9)" in text
        wagers = alert.locator("table.wagers").inner_text()
        # $5 and $2 at 24, 249 and 999 to 1
        for amount in ("$120", "$1,245", "$4,995", "$48", "$498", "$1,998"):
            assert amount in wagers
        assert page.evaluate("window.sameDocument") is True  # live, not reloaded
        assert not alert.locator("button").is_visible()  # the pit only reads
        page.goto(floor.url + "/login")
        page.fill("input[name=user]", "alice")
        page.fill("input[name=password]", PASSWORD)
        page.click("button:has-text('Log in')")
        page.wait_for_selector("#user:text('alice')")
        page.click('#alerts [data-kind="surveillance"] button')
        page.locator(
            '#alerts [data-kind="surveillance"] .status:has-text("sent by alice")'
        ).wait_for()
        wait_for(lambda: any(c.get("op") == "confirm" for c in table.commands))
        confirm = next(c for c in table.commands if c.get("op") == "confirm")
        page.evaluate("window.sameDocument = true")
        # the table journals the confirmation and publishes the record
        table.publish(
            journal.apply(
                Confirm(
                    confirm["hand"], confirm["by"], confirm["id"], actor=f"floor:{confirm['by']}"
                )
            )
        )
        row(page, "CR-07").locator(".alert-cell:has-text('confirmed by alice')").wait_for()
        assert page.locator('#alerts [data-kind="surveillance"]').count() == 0
        assert page.evaluate("window.sameDocument") is True
    finally:
        table.close()
        journal.close()


def test_a_table_going_offline_shows_without_a_reload(
    mosquitto: Mosquitto, floor: FloorProcess, page: Any
) -> None:
    table = Publisher(mosquitto, "CR-08")
    table.online(record=0)
    row(page, "CR-08").locator(".online:has-text('online')").wait_for()
    table.drop()  # no goodbye: the broker publishes the table's will
    row(page, "CR-08").locator(".online:has-text('OFFLINE')").wait_for()
    page.locator('#alerts [data-kind="offline"][data-table="CR-08"]').wait_for()
    assert page.evaluate("window.sameDocument") is True


def test_a_gap_is_filled_by_a_resend(
    tmp_path: Path, mosquitto: Mosquitto, floor: FloorProcess, page: Any
) -> None:
    journal = TableJournal(tmp_path / "table.db", table="CR-07")
    table = Publisher(mosquitto, "CR-07")
    try:
        journal.do("bet 1 5", *make_points(4, 5))
        records = journal.records()
        table.answer_resend = False
        table.publish(records, skip=[3, 4])  # lost on the way
        gap = row(page, "CR-07").locator(".b-gap:has-text('resend asked from 3')")
        gap.wait_for()
        assert "missing records 3–4" in gap.inner_text()
        table.answer_resend = True  # the floor asks again; this time the table answers
        row(page, "CR-07").locator(f".records:text-is('{len(records)}')").wait_for()
        assert row(page, "CR-07").locator(".b-gap").count() == 0
        assert page.evaluate("window.sameDocument") is True
        assert sum(c == {"op": "resend", "from": 3} for c in table.commands) >= 2
    finally:
        table.close()
        journal.close()


def timed(records: list[Any], start: str) -> list[Any]:
    """The records as if journaled a second apart from ``start`` (the floor reads the
    time of the record that settled a hand; it does not hold the table's key)."""
    at = to_ms(start)
    assert at is not None
    return [replace(r, at=iso(at + 1000 * i)) for i, r in enumerate(records)]


def test_the_shift_figures_draw_the_hands_of_the_shift(
    tmp_path: Path, mosquitto: Mosquitto, browser: Any
) -> None:
    floor = FloorProcess(tmp_path / "floor", mosquitto, env={"TZ": "America/New_York"})
    a = TableJournal(tmp_path / "a.db", table="CR-07")
    b = TableJournal(tmp_path / "b.db", table="CR-08")
    tables = [Publisher(mosquitto, "CR-07"), Publisher(mosquitto, "CR-08")]
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    try:
        # CR-07, day shift (08:00-16:00 New York = 13:00-21:00 UTC): won at 4 points ($5
        # and $2 at 24 to 1: paid $175 with the wagers back), then $5 lost at 0 points
        a.do("bet 1 5", "bet 2 2", *make_points(4, 5, 6, 8), "2 2", "3 4", "bet 1 5", "4 4", "3 4")
        tables[0].publish(timed(a.records(), "2026-12-02T14:30:00+00:00"))
        # CR-08: $3 lost at 1 point in the day shift; $4 lost at 0 points at 22:00 (swing)
        b.do("bet 1 3", "4 4", "4 4", "5 5", "3 4")
        day = b.records()  # from record 1, the journal's start
        swing = b.do("bet 2 4", "4 5", "3 4")
        tables[1].publish(timed(day, "2026-12-02T15:00:00+00:00"))
        tables[1].publish(timed(swing, "2026-12-03T03:00:00+00:00"))
        held = {"CR-07": len(a.records()), "CR-08": len(b.records())}
        wait_for(lambda: all((floor.table(t) or {}).get("record") == n for t, n in held.items()))

        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        page.goto(floor.url + "/")
        page.click("header a:has-text('Figures')")
        page.wait_for_selector("h1:has-text('Shift figures')")
        page.fill("input[name=date]", "2026-12-02")
        page.select_option("select[name=shift]", "day")
        page.click("#figures-form button")
        page.wait_for_selector("#period:has-text('day shift, Wed 2 Dec 2026, 08:00-16:00')")

        def cells(table: str) -> list[str]:
            row = page.locator(f'#figures tr[data-figures="{table}"] td')
            return [c.strip() for c in row.all_inner_texts()]

        nj = "4: 24, 5: 249, 6: 999"
        assert cells("CR-07") == ["CR-07", "2", "$12", "$175", "-$163", "-1,358.33%", "20.76%", nj]
        assert cells("CR-08") == ["CR-08", "1", "$3", "$0", "$3", "100.00%", "20.76%", nj]
        assert cells("floor") == [
            "the floor", "3", "$15", "$175", "-$160", "-1,066.67%", "20.76%", nj
        ]  # fmt: skip

        def bar(chart: str, category: str, series: str) -> Any:
            return page.locator(
                f'svg#{chart} rect[data-category="{category}"][data-series="{series}"]'
            )

        assert float(bar("chart-hold", "CR-07", "hold %").get_attribute("data-value")) == (
            pytest.approx(-1358.333, abs=1e-3)
        )
        assert bar("chart-hold", "floor", "theoretical hold %").locator("title").text_content() == (
            "floor, theoretical hold %: 20.76%"
        )
        assert bar("chart-handle", "CR-07", "paid").locator("title").text_content() == (
            "CR-07, paid: $175"
        )
        counts = [bar("chart-points", str(k), "hands").get_attribute("data-value") for k in
                  range(7)]  # fmt: skip
        assert counts == ["1.0", "1.0", "0.0", "0.0", "1.0", "0.0", "0.0"]
        expected = bar("chart-points", "0", "expected (exact odds)").locator("title")
        assert expected.text_content() == "0, expected (exact odds): 1.78"  # 3 * 98/165
        assert page.locator("svg.chart[role=img] > title").count() == 3
        shot = tmp_path / "floor-figures.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if os.environ.get("FIREBET_SCREENSHOTS"):  # the docs' picture: docs/images/
            shutil.copy(shot, Path(os.environ["FIREBET_SCREENSHOTS"]) / shot.name)

        # the swing shift: CR-08's second hand alone
        page.select_option("select[name=shift]", "swing")
        page.click("#figures-form button")
        page.wait_for_selector("#period:has-text('swing shift')")
        assert cells("CR-07")[1:3] == ["0", "$0"]
        assert cells("CR-08")[1:6] == ["1", "$4", "$0", "$4", "100.00%"]

        # one table's page, and its CSV
        page.click('#figures tr[data-figures="CR-08"] a')
        page.wait_for_selector("h1:has-text('table CR-08')")
        assert page.locator("#figures tbody tr").count() == 1
        csv_url = page.locator("#csv").get_attribute("href")
        with urllib.request.urlopen(floor.url + csv_url, timeout=10) as reply:
            assert reply.headers["Content-Type"].startswith("text/csv")
            rows = list(csv.reader(io.StringIO(reply.read().decode())))
        assert rows[0][:8] == ["date", "shift", "start", "end", "scope", "table", "hands", "handle"]
        assert rows[1][:8] == [
            "2026-12-02", "swing", "2026-12-02T16:00:00-05:00", "2026-12-03T00:00:00-05:00",
            "table", "CR-08", "1", "4",
        ]  # fmt: skip
        with urllib.request.urlopen(floor.url + "/figures.csv?date=2026-12-02&shift=day") as r:
            day_rows = list(csv.reader(io.StringIO(r.read().decode())))
        assert [(r[4], r[5], r[6], r[7], r[8]) for r in day_rows[1:]] == [
            ("table", "CR-07", "2", "12", "175"), ("table", "CR-08", "1", "3", "0"),
            ("floor", "", "3", "15", "175"),
        ]  # fmt: skip

        # a bad query is refused, naming what was wrong; the icon is the floor's own
        reply = page.goto(floor.url + "/figures?shift=night")
        assert reply is not None and reply.status == 400
        assert "shift: no shift 'night' (the shifts: grave, day, swing)" in page.content()
        icon = page.goto(floor.url + "/favicon.ico")
        assert icon is not None and icon.headers["content-type"] == "image/svg+xml"
    finally:
        context.close()
        for t in tables:
            t.close()
        a.close()
        b.close()
        floor.stop()
