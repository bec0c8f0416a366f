"""The floor console in a real browser (the distribution's headless Chromium, driven by
Playwright): the floor map with 30 tables fits a wall screen and a tablet with the alerts
in sight; a 5th point reaches the alerts live, sounds, counts in the tab title, and is
confirmed; a settled hand's alert shows what was paid; a superseded or refused one offers
only a note; a table's page hears only its table and shows the dice; a table goes
offline; a gap is filled by a resend; the shift figures and their charts.

With ``FIREBET_SCREENSHOTS=DIR`` (``make screenshots``) the floor map, a table's page and
the shift figures are saved as PNG files in DIR (docs/images)."""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from controller.core.commands import Confirm
from controller.core.times import iso, to_ms
from controller.floor.passwords import hash_password
from controller.wire.messages import FloorRecord
from tests.broker import Mosquitto
from tests.floor_support import FloorProcess, Publisher, TableJournal, fill_floor, make_points
from tests.support import wait_for

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
]  # fmt: skip
PASSWORD = "correct horse battery"
WAIT_MS = 30_000
CLOCK = re.compile(r"^\d\d:\d\d:\d\d$")  # the floor's local time, to the second
SHOTS = os.environ.get("FIREBET_SCREENSHOTS", "")


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


def open_page(browser: Any, url: str, **context: Any) -> tuple[Any, Any]:
    ctx = browser.new_context(**context)
    p = ctx.new_page()
    p.set_default_timeout(WAIT_MS)
    p.goto(url)
    p.wait_for_selector("#live:text('live')")
    p.evaluate("window.sameDocument = true")  # gone if the page reloads
    return ctx, p


@pytest.fixture
def page(browser: Any, floor: FloorProcess) -> Iterator[Any]:
    ctx, p = open_page(browser, floor.url + "/")
    try:
        yield p
    finally:
        ctx.close()


def tile(page: Any, table: str) -> Any:
    return page.locator(f'.tile[data-table="{table}"]')


RECTS = """selector => Array.from(document.querySelectorAll(selector), e => {
  const r = e.getBoundingClientRect();
  return {x: r.x, y: r.y, width: r.width, height: r.height};
})"""


def rects(page: Any, selector: str) -> list[dict[str, float]]:
    """The boxes of every element the selector finds, read in one step of the page's own
    script: a live update that redraws the map (the stream's first event does) cannot
    take an element away between finding it and measuring it, as it could between two
    of Playwright's calls (``bounding_box`` then answers None)."""
    return page.evaluate(RECTS, selector)


MARKS = """cover => Array.from(document.querySelectorAll('.box'), box => {
  const mark = box.querySelector(cover);
  if (!mark) { return null; }
  const box_of = e => { const r = e.getBoundingClientRect();
                        return {x: r.x, y: r.y, width: r.width, height: r.height}; };
  return [box.dataset.number, box_of(box.querySelector('b')), box_of(mark)];
}).filter(found => found !== null)"""  # each marker box's number, digit and cover


def rect(page: Any, selector: str) -> dict[str, float]:
    """The box of the one element the selector finds, read as :func:`rects` reads."""
    page.locator(selector).first.wait_for()
    found = rects(page, selector)
    assert len(found) == 1, f"{selector}: {len(found)} elements"
    return found[0]


def log_in(page: Any, floor: FloorProcess, back: str = "/") -> None:
    page.goto(floor.url + "/login")
    page.fill("input[name=user]", "alice")
    page.fill("input[name=password]", PASSWORD)
    page.click("button:has-text('Log in')")
    page.wait_for_selector("#user:text('alice')")
    if back != "/":
        page.goto(floor.url + back)
    page.wait_for_selector("#live:text('live')")


def shoot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / name))


# --- the floor at a glance ---------------------------------------------------------------
def thirty_tables(folder: Path) -> dict[str, list[FloorRecord]]:
    """30 tables at every stage of a hand; CR-05 at its 5th point, CR-30 sending 130
    records whose events cannot be read (a flood of audit alerts)."""
    numbers = [4, 5, 6, 8, 9, 10]
    tables: dict[str, list[FloorRecord]] = {}
    for i in range(29):
        name = f"CR-{i + 1:02d}"
        journal = TableJournal(folder / f"{name}.db", table=name)
        made = 5 if name == "CR-05" else i % 5
        bets = ["bet 3 5", "bet 7 2", "bet 12 1"][: 2 if name == "CR-05" else i % 4]
        journal.do(*bets, *make_points(*numbers[:made]), *(["3 3"] if i % 2 else []))
        tables[name] = journal.records()
        journal.close()
    flood = TableJournal(folder / "CR-30.db", table="CR-30")
    flood.do(*["2 3", "3 4"] * 65)
    tables["CR-30"] = [
        replace(r, events="garbled") if r.kind == "command" else r for r in flood.records()
    ]
    flood.close()
    return tables


def test_thirty_tables_fit_a_wall_screen_with_the_alerts_in_sight(
    tmp_path: Path, mosquitto: Mosquitto, browser: Any
) -> None:
    fill_floor(tmp_path / "floor" / "state" / "floor.db", thirty_tables(tmp_path / "tables"))
    placed = "[tables.CR-01]\nposition = [5, 7]\n"  # the config puts CR-01 bottom right
    floor = FloorProcess(tmp_path / "floor", mosquitto, extra=placed)
    try:
        ctx, page = open_page(browser, floor.url + "/", viewport={"width": 1920, "height": 1080})
        try:
            page.locator(".tile").nth(29).wait_for()
            assert page.locator(".tile").count() == 30
            width, height = 1920, 1080
            tiles = rects(page, ".tile")
            assert len(tiles) == 30
            for box in tiles:
                assert box["x"] >= 0 and box["y"] >= 0
                assert box["x"] + box["width"] <= width and box["y"] + box["height"] <= height
            scroll = page.evaluate(
                "[document.documentElement.scrollHeight, document.documentElement.scrollWidth]"
            )
            assert scroll[0] <= height and scroll[1] <= width  # nothing to scroll to
            one = rect(page, '.tile[data-table="CR-01"]')
            assert all(
                one["x"] >= b["x"] - 1 and one["y"] >= b["y"] - 1 for b in rects(page, ".tile")
            )
            # the 5th point at CR-05: its tile in yellow words, its alert ahead of the flood
            five = tile(page, "CR-05")
            assert "c-yellow" in (five.get_attribute("class") or "")
            assert "5th point: hand 1" in five.inner_text()
            lit = five.locator(".box.lit")
            assert [lit.nth(k).get_attribute("data-ordinal") for k in range(5)] == list("12345")
            cards = page.locator("#alerts .alert")
            assert cards.first.get_attribute("data-table") == "CR-05"
            flood = page.locator('#alerts .alert.flood[data-table="CR-30"]')
            assert flood.get_attribute("data-count") == "130"
            assert "130 payout check alerts" in flood.inner_text()
            assert page.locator('#alerts .alert[data-table="CR-30"]').count() == 1
            alert = rect(page, '#alerts [data-kind="surveillance"]')
            assert alert["y"] + alert["height"] <= height  # in sight, not below the fold
            assert page.title().startswith("(131) ")
            assert CLOCK.match(page.locator("#alerts time").first.inner_text())
            assert "c-red" in (tile(page, "CR-30").get_attribute("class") or "")
            text = page.inner_text("body")
            assert "Records" not in text and "Second opinion" not in text
            shoot(page, "floor-map.png")
            # a tablet, both ways up: the alerts stay in sight, the map scrolls beneath them
            for size in ({"width": 1024, "height": 768}, {"width": 768, "height": 1024}):
                page.set_viewport_size(size)
                panel = rect(page, ".panel")
                assert panel["y"] + panel["height"] <= size["height"]
                card = rect(page, '#alerts [data-kind="surveillance"]')
                assert card["y"] >= 0 and card["y"] + 40 <= size["height"]
                assert rect(page, ".map")["y"] < size["height"]
            shoot(page, "floor-tablet.png")
        finally:
            ctx.close()
        api = floor.get("/api/alerts")
        assert [a["table"] for a in api[:1]] == ["CR-05"]  # the flood did not push it off
        (flood_entry,) = [a for a in api if a["table"] == "CR-30"]
        assert flood_entry["flood"]["count"] == 130
        # a page past the end is the last (a page that is no number is a 400: #32,
        # tests/e2e/test_floor_http_attacks.py)
        assert 'data-page="1"' in floor.page("/alerts?page=9")
    finally:
        floor.stop()


# --- an alert's life ---------------------------------------------------------------------
def test_the_fifth_point_is_confirmed_from_the_queue_and_the_table_reports_it(
    tmp_path: Path, mosquitto: Mosquitto, floor: FloorProcess, page: Any
) -> None:
    journal = TableJournal(tmp_path / "table.db", table="CR-07")
    table = Publisher(mosquitto, "CR-07")
    try:
        log_in(page, floor)
        page.check("#sound")  # off by default; a person turns it on
        journal.do("bet 3 5", "bet 7 2", *make_points(4, 5, 6, 8))
        table.publish(journal.records())
        tile(page, "CR-07").locator('.box.lit[data-number="8"][data-ordinal="4"]').wait_for()
        assert page.locator('#alerts [data-kind="surveillance"]').count() == 0
        assert page.evaluate("window.firebetBeeps") == 0
        assert not page.title().startswith("(")
        page.evaluate("window.sameDocument = true")
        table.publish(journal.do(*make_points(9)))
        alert = page.locator('#alerts [data-kind="surveillance"][data-table="CR-07"]')
        alert.wait_for()
        text = alert.inner_text()
        assert "hand 1: 5 different points (4, 5, 6, 8, 9)" in text
        wagers = alert.locator("table.wagers").inner_text()
        for amount in ("$120", "$1,245", "$4,995", "$48", "$498", "$1,998"):  # 24/249/999 to 1
            assert amount in wagers
        assert CLOCK.match(alert.locator("time").inner_text())
        wait_for(lambda: page.evaluate("window.firebetBeeps") == 1, what="the beep")
        assert page.title().startswith("(1) ")
        assert page.evaluate("window.sameDocument") is True  # live, not reloaded
        page.click("#alerts button:has-text('Confirm hand 1')")
        alert.locator('.status:has-text("sent by alice")').wait_for()
        assert alert.locator("button:has-text('Confirm')").count() == 0  # nothing to redo
        wait_for(lambda: any(c.get("op") == "confirm" for c in table.commands))
        confirm = next(c for c in table.commands if c.get("op") == "confirm")
        page.evaluate("window.sameDocument = true")
        table.publish(
            journal.apply(
                Confirm(
                    confirm["hand"], confirm["by"], confirm["id"], actor=f"floor:{confirm['by']}"
                )
            )
        )
        tile(page, "CR-07").locator(".words:has-text('confirmed by alice')").wait_for()
        words = tile(page, "CR-07").locator(".words").inner_text()
        assert re.fullmatch(r"hand \d+ confirmed by alice at \d\d:\d\d:\d\d", words), words
        assert page.locator('#alerts [data-kind="surveillance"]').count() == 0
        assert not page.title().startswith("(")
        assert page.evaluate("window.sameDocument") is True
    finally:
        table.close()
        journal.close()


def test_a_settled_hand_s_alert_asks_to_confirm_what_was_paid(
    tmp_path: Path, mosquitto: Mosquitto, floor: FloorProcess, page: Any
) -> None:
    journal = TableJournal(tmp_path / "table.db", table="CR-07")
    table = Publisher(mosquitto, "CR-07")
    try:
        log_in(page, floor)
        journal.do("bet 3 5", *make_points(4, 5, 6, 8, 9), "4 4", "3 4")
        table.publish(journal.records())  # from its first record
        alert = page.locator('#alerts [data-kind="surveillance"][data-table="CR-07"]')
        alert.locator(".settled").wait_for()
        assert "paid $1,245" in alert.inner_text()  # what was paid, not what might be
        assert "would pay" not in alert.inner_text()
        page.click("#alerts button:has-text('Confirm the payout of hand 1 ($1,245 paid)')")
        wait_for(lambda: any(c.get("op") == "confirm" for c in table.commands))
        confirm = next(c for c in table.commands if c.get("op") == "confirm")
        table.publish(journal.apply(Confirm(1, confirm["by"], confirm["id"], actor="floor:alice")))
        page.locator('#alerts [data-kind="surveillance"]').first.wait_for(state="detached")
        # hand 2 makes its 5th point
        table.publish(journal.do("bet 3 5", *make_points(4, 5, 6, 8, 9)))
        page.locator('#alerts [data-kind="surveillance"]').wait_for()
        page.click("#alerts button:has-text('Confirm hand 2')")
        wait_for(lambda: sum(c.get("op") == "confirm" for c in table.commands) == 2)
        # before the table takes it, hand 3 makes its 5th point too: the table still takes
        # hand 2's confirmation (every 5-point hand is confirmable, in any order: #32)
        table.publish(journal.do("4 4", "3 4", "bet 1 1", *make_points(4, 5, 6, 8, 9)))
        page.locator("#alerts button:has-text('Confirm hand 3')").wait_for()
        second = [c for c in table.commands if c.get("op") == "confirm"][1]
        table.publish(journal.apply(Confirm(2, "alice", second["id"], actor="floor:alice")))
        page.wait_for_function(  # hand 2's card goes as the table's confirmation arrives
            "document.querySelectorAll('#alerts [data-kind=\"surveillance\"]').length === 1"
        )
        newest = page.locator('#alerts [data-kind="surveillance"][data-status="open"]')
        assert "Confirm hand 3" in newest.locator("button.confirm").inner_text()
        assert page.locator('#alerts [data-status="refused"]').count() == 0
    finally:
        table.close()
        journal.close()


# --- a table's page ----------------------------------------------------------------------
def test_a_table_s_page_hears_only_its_table_and_shows_the_dice(
    tmp_path: Path, mosquitto: Mosquitto, floor: FloorProcess, browser: Any
) -> None:
    seven = TableJournal(tmp_path / "cr07.db", table="CR-07")
    eight = TableJournal(tmp_path / "cr08.db", table="CR-08")
    t7, t8 = Publisher(mosquitto, "CR-07"), Publisher(mosquitto, "CR-08")
    heard: list[bytes] = []

    def listen() -> None:
        with urllib.request.urlopen(floor.url + "/events?table=CR-07", timeout=30) as stream:
            while b"hand 2" not in b"".join(heard):
                heard.append(stream.readline())

    try:
        seven.do("bet 3 5", "bet 7 2", "2 2", "1 3", "2 3")  # 4 made, 5 the point
        eight.do("bet 1 2", "5 5")
        t7.online(record=len(seven.records()))
        t7.state({"mode": "running"})
        t7.publish(seven.records())
        t8.publish(eight.records())
        wait_for(lambda: floor.table("CR-08") is not None and floor.table("CR-07") is not None)
        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        ctx, page = open_page(browser, floor.url + "/tables/CR-07",
                              viewport={"width": 1920, "height": 1080})  # fmt: skip
        try:
            t8.publish(eight.do("6 4", "2 5"))  # the other table plays on
            t7.publish(seven.do("2 3", "6 5", "4 4", "4 3", "bet 1 5", "3 3"))  # 5 made, 8, out
            page.locator('#hands .hand[data-hand="2"]').wait_for()
            assert page.locator(".tile").count() == 1
            assert page.locator('.tile[data-table="CR-07"]').count() == 1
            assert "CR-08" not in page.inner_text("body")
            hand = page.locator('#hands .hand[data-hand="1"]')
            faces = hand.locator(".dice .die")
            shown = [faces.nth(k).get_attribute("data-face") for k in range(faces.count())]
            assert shown == list("22132323654443")
            timeline = hand.locator("table.timeline").inner_text()
            assert "bet $5 on position 3" in timeline and "rolled" in timeline
            assert "lose at 2 points" in hand.locator("h3").inner_text()
            assert "running" in page.locator(".tile .mode").inner_text()
            assert page.evaluate("window.sameDocument") is True
            shoot(page, "table-page.png")
        finally:
            ctx.close()
        listener.join(timeout=30)
        assert b"hand 2" in b"".join(heard)
        assert b"CR-08" not in b"".join(heard)  # its stream sent only its table
    finally:
        for t in (t7, t8):
            t.close()
        seven.close()
        eight.close()


# --- presence and gaps -------------------------------------------------------------------
def test_a_table_going_offline_shows_without_a_reload(
    mosquitto: Mosquitto, floor: FloorProcess, page: Any
) -> None:
    table = Publisher(mosquitto, "CR-08")
    table.online(record=0)
    tile(page, "CR-08").locator(".link:has-text('online')").wait_for()
    page.evaluate("window.sameDocument = true")
    table.drop()  # no goodbye: the broker publishes the table's will
    tile(page, "CR-08").locator(".link:has-text('OFFLINE')").wait_for()
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
        gap = tile(page, "CR-07").locator(
            ".words:has-text('records 3–4 missing: asked again from 3')"
        )
        gap.wait_for()
        page.evaluate("window.sameDocument = true")
        table.answer_resend = True  # the floor asks again; this time the table answers
        tile(page, "CR-07").locator('.box.lit[data-number="5"][data-ordinal="2"]').wait_for()
        tile(page, "CR-07").locator(".words:has-text('no alert')").wait_for()
        assert tile(page, "CR-07").get_attribute("data-record") == str(len(records))
        assert page.evaluate("window.sameDocument") is True
        assert sum(c == {"op": "resend", "from": 3, "v": 1} for c in table.commands) >= 2
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
        # paid: the winnings, as on an alert card; the wagers returned apart (#32)
        assert cells("CR-07") == [
            "CR-07", "2", "$12", "$168", "$7", "-$163", "-1,358.33%", "20.76%", nj
        ]  # fmt: skip
        assert cells("CR-08") == ["CR-08", "1", "$3", "$0", "$0", "$3", "100.00%", "20.76%", nj]
        assert cells("floor") == [
            "the floor", "3", "$15", "$168", "$7", "-$160", "-1,066.67%", "20.76%", nj
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
            "CR-07, paid: $168"
        )
        counts = [bar("chart-points", str(k), "hands").get_attribute("data-value") for k in
                  range(7)]  # fmt: skip
        assert counts == ["1.0", "1.0", "0.0", "0.0", "1.0", "0.0", "0.0"]
        expected = bar("chart-points", "0", "expected (exact odds)").locator("title")
        assert expected.text_content() == "0, expected (exact odds): 1.78"  # 3 * 98/165
        assert page.locator("svg.chart[role=img] > title").count() == 5  # with the trend
        trend = bar("chart-trend-hold", "09:00", "hold %")  # CR-07's two hands at 09:30
        assert trend.locator("title").text_content() == "09:00, hold %: -1,358.33%"
        assert bar("chart-trend-hold", "10:00", "hold %").get_attribute("data-value") == "100.0"
        assert_no_words_overlap(page)  # five charts, the trend's 8 hours among them
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
        assert cells("CR-08")[1:7] == ["1", "$4", "$0", "$0", "$4", "100.00%"]

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
            ("table", "CR-07", "2", "12", "168"), ("table", "CR-08", "1", "3", "0"),
            ("floor", "", "3", "15", "168"),
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


OVERLAPS_JS = """() => {
  // each word's box as drawn: its own box (getBBox) through its transform (a rotated
  // category label is a rotated box), shrunk by half a pixel; two boxes overlap when no
  // edge of either separates them (the separating axis test for convex shapes)
  const corners = t => {
    const b = t.getBBox(), m = t.getCTM(), k = 0.5;
    return [[b.x + k, b.y + k], [b.x + b.width - k, b.y + k],
            [b.x + b.width - k, b.y + b.height - k], [b.x + k, b.y + b.height - k]]
      .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
  };
  const apart = (p, q) => [p, q].some(shape => shape.some((a, i) => {
    const b = shape[(i + 1) % 4], n = [b[1] - a[1], a[0] - b[0]];
    const on = s => s.map(([x, y]) => x * n[0] + y * n[1]);
    const [u, v] = [on(p), on(q)];
    return Math.max(...u) <= Math.min(...v) || Math.max(...v) <= Math.min(...u);
  }));
  return [...document.querySelectorAll('svg.chart')].flatMap(chart => {
    const words = [...chart.querySelectorAll('text')].filter(t => t.textContent.trim())
      .map(t => [t.textContent.trim(), corners(t)]);
    const found = [];
    for (let i = 0; i < words.length; i++) for (let j = i + 1; j < words.length; j++)
      if (!apart(words[i][1], words[j][1]))
        found.push(`${chart.id}: "${words[i][0]}" over "${words[j][0]}"`);
    return found;
  });
}"""


def assert_no_words_overlap(page: Any) -> None:
    """No two words of any chart on the page (axis ticks, values, categories, legend, the
    off-the-scale note) lie over each other by more than a pixel, as the browser draws them."""
    overlaps = page.evaluate(OVERLAPS_JS)
    assert overlaps == [], overlaps


def test_one_hand_off_the_scale_leaves_every_other_bar_readable(
    tmp_path: Path, mosquitto: Mosquitto, browser: Any
) -> None:
    """One hand at -99,900% hold flattened every other bar of the shift chart (#32): it
    is drawn to the edge and named, and the others keep their height, in the browser."""
    played = {
        "CR-07": ("bet 1 1", *make_points(4, 5, 6, 8, 9, 10), "4 4", "3 4"),  # paid 999 to 1
        "CR-08": ("bet 1 5", "4 4", "3 4"),  # lost: hold 100%
        "CR-09": ("bet 1 4", "bet 2 1", "5 5", "3 4"),
    }
    records = {}
    for name, lines in played.items():
        journal = TableJournal(tmp_path / f"{name}.db", table=name)
        journal.do(*lines)
        records[name] = timed(journal.records(), "2026-12-02T14:30:00+00:00")
        journal.close()
    fill_floor(tmp_path / "floor" / "state" / "floor.db", records)
    floor = FloorProcess(tmp_path / "floor", mosquitto)
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    try:
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        page.goto(floor.url + "/figures?date=2026-12-02")
        hold = page.locator("svg#chart-hold")
        outlier = hold.locator('rect[data-category="CR-07"][data-series="hold %"]')
        assert float(outlier.get_attribute("data-value")) == pytest.approx(-99_900.0)
        assert "clipped" in (outlier.get_attribute("class") or "")
        assert "off the scale: CR-07 hold %" in (
            hold.locator("text.off-scale").text_content() or ""
        )
        for name in ("CR-08", "CR-09"):  # on a scale of their own: seen, not flattened
            box = hold.locator(f'rect[data-category="{name}"][data-series="hold %"]').bounding_box()
            assert box is not None and box["height"] > 20, (name, box)
        assert_no_words_overlap(page)  # the labels overlapped around the outlier (#32)
        shot = tmp_path / "floor-figures-outlier.png"
        hold.screenshot(path=str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if SHOTS:
            shutil.copy(shot, Path(SHOTS) / shot.name)
    finally:
        context.close()
        floor.stop()


# --- the dark room -----------------------------------------------------------------------
def test_a_console_for_a_dark_room_ages_escalates_sounds_and_confirms_from_the_tile(
    tmp_path: Path, mosquitto: Mosquitto, browser: Any
) -> None:
    """Issue 32, as an operator meets the console: a dark theme by default for surveillance
    (light for the pit), sound on by default with a mute, each alert's age, escalation to
    red then to a sound again past a configured time, the tile's own Confirm turning it to
    the confirmed look at once, markers that never cover their digit on a tablet, and a
    log line for the alert raised, confirmed and cleared."""
    floor = FloorProcess(
        tmp_path / "floor", mosquitto, users={"alice": hash_password(PASSWORD)},
        extra="[web]\nescalate_after_s = 2.0\nsound_after_s = 3.0",
    )  # fmt: skip
    journal = TableJournal(tmp_path / "table.db", table="CR-07")
    other = TableJournal(tmp_path / "other.db", table="CR-08")
    table, table8 = Publisher(mosquitto, "CR-07"), Publisher(mosquitto, "CR-08")
    ctx, page = open_page(browser, floor.url + "/", viewport={"width": 1920, "height": 1080})
    pit_ctx, pit = open_page(browser, floor.url + "/", viewport={"width": 768, "height": 1024})
    try:
        assert pit.evaluate("document.documentElement.dataset.theme") == "light"
        assert pit.locator("#sound").is_checked() is False  # the pit: no sound unless asked
        log_in(page, floor)
        assert page.evaluate("document.documentElement.dataset.theme") == "dark"
        assert page.locator("#sound").is_checked()  # on by default for surveillance
        other.do("bet 3 5", *make_points(4, 5, 6), "6 4")  # the point: 10
        table8.publish(other.records())
        journal.do("bet 3 5", "bet 7 2", *make_points(4, 5, 6, 8, 9))
        table.publish(journal.records())
        alert = page.locator('#alerts [data-kind="surveillance"][data-table="CR-07"]')
        alert.wait_for()
        wait_for(lambda: page.evaluate("window.firebetBeeps") == 1, what="the new alert's beep")
        alert.locator(".age:text-matches('^\\\\d+ s ago$')").wait_for()
        page.locator("#alerts .alert.aged").wait_for()  # red past escalate_after_s
        assert page.evaluate("window.firebetEscalations") == 1
        wait_for(lambda: page.evaluate("window.firebetBeeps") == 2, what="the escalation's sound")
        shoot(page, "floor-map-dark.png")
        # the alert queue's own page ages and escalates its alerts alike (the docs' picture)
        queue = ctx.new_page()
        queue.set_default_timeout(WAIT_MS)
        queue.goto(floor.url + "/alerts")
        aged = queue.locator('#alerts .alert.aged[data-table="CR-07"]')
        aged.wait_for()
        aged.locator(".age:text-matches('^\\\\d+ s ago$')").wait_for()
        shoot(queue, "alert-queue-dark.png")
        queue.close()
        # the pit on a tablet: the ON puck and the ordinals never cover a digit
        pit.locator('.tile[data-table="CR-08"] .box.point').wait_for()
        for cover in (".puck", "sup"):
            covers = pit.evaluate(MARKS, cover)  # in one step, as rects() explains
            assert covers, cover  # CR-08's point wears the puck, its points their ordinals
            for number, digit, other_box in covers:
                overlaps = not (
                    other_box["x"] >= digit["x"] + digit["width"]
                    or other_box["x"] + other_box["width"] <= digit["x"]
                    or other_box["y"] >= digit["y"] + digit["height"]
                    or other_box["y"] + other_box["height"] <= digit["y"]
                )
                assert not overlaps, (number, cover)
        # muted: kept by the browser (the page reloads after the Confirm below)
        page.uncheck("#sound")
        # the tile's own Confirm: the tile turns to the confirmed look at once
        five = tile(page, "CR-07")
        five.locator("button:has-text('Confirm hand 1')").click()
        page.wait_for_selector("#live:text('live')")
        tile(page, "CR-07").locator(".words:has-text('hand 1 confirmed')").wait_for()
        assert "c-green" in (tile(page, "CR-07").get_attribute("class") or "")
        wait_for(lambda: any(c.get("op") == "confirm" for c in table.commands))
        confirm = next(c for c in table.commands if c.get("op") == "confirm")
        table.publish(journal.apply(Confirm(1, confirm["by"], confirm["id"], actor="floor:alice")))
        tile(page, "CR-07").locator(".words:has-text('confirmed by alice')").wait_for()
        assert page.locator("#sound").is_checked() is False  # still muted
        log = floor.log()
        assert "table CR-07: 5th-point alert raised for hand 1" in log
        assert "table CR-07: alice sent the confirmation of hand 1" in log
        wait_for(lambda: "table CR-07: hand 1 confirmed by alice" in floor.log(), what="log")
        # the theme is the person's to switch
        page.click("#theme")
        assert page.evaluate("document.documentElement.dataset.theme") == "light"
    finally:
        ctx.close()
        pit_ctx.close()
        table.close()
        table8.close()
        journal.close()
        other.close()
        floor.stop()
