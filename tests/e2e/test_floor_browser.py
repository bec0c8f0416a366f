"""The floor console in a real browser (the distribution's headless Chromium, driven by
Playwright): a 5th point reaches the alert queue live, surveillance confirms it and the
table reports it; a table goes offline; a gap is filled by a resend."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.core.commands import Confirm
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
        assert sum(c == {"op": "resend", "from": 3, "v": 1} for c in table.commands) >= 2
    finally:
        table.close()
        journal.close()
