"""One meaning of the journal: the table's recall and the floor's hand view are one
projection of one replay, a change of rules never changes a past record's meaning, and a
clear-halt after a forged snapshot resumes on every roll the chain proves."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.core.commands import (
    Ack,
    ApplyHeld,
    Bet,
    Cancel,
    Command,
    Confirm,
    DiscardHeld,
    ReaderFault,
    ReaderHello,
    Roll,
    Surrender,
    Void,
)
from controller.core.config import FireBetRules, load_config
from controller.core.engine import Engine
from controller.floor.audit import TableAudit
from controller.floor.findings import Findings
from controller.journal import Journal, canonical, recover, verify
from controller.journal.handlog import HISTORY_KEYS
from controller.journal.key import read_key
from controller.journal.play import decide
from controller.journal.recipe import seal
from tests.floor_support import TableJournal
from tests.support import run_firebet

dice = st.integers(1, 6)
commands: st.SearchStrategy[Command] = st.one_of(
    *[st.builds(Roll, dice, dice, source=st.just("script"))] * 6,
    st.builds(Roll, dice, dice, source=st.just("reader"), seq=st.integers(0, 9)),
    st.builds(Roll, dice, dice, source=st.just("manual")),
    st.builds(Bet, st.integers(0, 17), st.integers(0, 7)),
    st.builds(Cancel, st.integers(1, 16)),
    st.builds(Void),
    st.builds(Surrender, kind=st.sampled_from(["voluntary", "compulsory"])),
    st.builds(Ack),
    st.builds(Confirm, st.integers(1, 4), st.just("alice"), st.just("c-1")),
    st.builds(ApplyHeld),
    st.builds(DiscardHeld),
    st.builds(ReaderHello),
    st.builds(ReaderFault, code=st.just("JAM")),
)
HOUSE = '[firebet]\npreset = "custom"\npays = { 3 = 5, 4 = 30, 5 = 300, 6 = 1000 }\nmax_wager = 7\n'


def floor_hands(table: TableJournal) -> dict[int, dict[str, Any]]:
    """The hands the floor keeps of the table's published records, as its ingest stores
    the hands each record touched (and drops the ones a void took back)."""
    audit, stored = TableAudit(), {}
    for rec in table.records():
        found: Findings = audit.step(rec)
        for number in found.dropped_hands:
            stored.pop(number, None)
        stored.update({n: json.loads(json.dumps(h)) for n, h in found.hands.items()})
    return stored


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(commands, max_size=90), st.lists(commands, max_size=60))
def test_the_table_s_recall_and_the_floor_s_hands_are_one_projection(
    tmp_path_factory: Any, before: list[Command], after: list[Command]
) -> None:
    folder = tmp_path_factory.mktemp("j")
    nj = load_config(None)
    house_file = folder / "house.toml"
    house_file.write_text(HOUSE)
    house = load_config(house_file)
    table = TableJournal(folder / "journal.db", config=nj)
    try:
        for command in before:
            table.apply(command)
        # a restart under other rules: records before keep the rules they were decided under
        table.take_rules(house)
        for command in after:
            table.apply(command)
        recall = table.history(1000)
        floor = floor_hands(table)
        assert [h["hand"] for h in recall] == sorted(floor)
        for line in recall:
            mine = {key: floor[line["hand"]][key] for key in HISTORY_KEYS}
            assert mine == line
    finally:
        table.close()


def test_a_rules_change_is_a_rules_action_in_the_hand_and_an_alert_on_the_floor(
    tmp_path: Path,
) -> None:
    house_file = tmp_path / "house.toml"
    house_file.write_text(HOUSE)
    table = TableJournal(tmp_path / "journal.db", config=load_config(None))
    table.do("bet 3 5", "2 2", "2 2")
    table.take_rules(load_config(house_file))
    # the seven-out: the hand keeps the NJ table it opened under (its bet rode when the
    # house's rules were journaled: SPEC section 2), the next hand plays the house's
    table.do("3 3", "3 3", "4 4", "4 4", "5 5", "4 3")
    (hand,) = table.history(2)[:1]
    rules = [a for a in hand["actions"] if a["action"] == "rules"]
    assert len(rules) == 1 and rules[0]["changed"]["firebet.pays"] == {
        "was": {"4": 24, "5": 249, "6": 999},
        "now": {"3": 5, "4": 30, "5": 300, "6": 1000},
    }
    assert hand["odds_to_one"] == 0 and hand["payouts"] == {"3": 0}  # 3 points: NJ loses
    table.do("bet 3 5", "2 2", "2 2", "3 3", "3 3", "4 4", "4 4", "5 5", "4 3")
    assert table.history(1)[-1]["payouts"] == {}  # (the hand in play)
    paid = [h for h in table.history(3) if h["result"] is not None][-1]
    assert paid["odds_to_one"] == 5 and paid["payouts"] == {"3": 25}  # the house's tier
    audit = TableAudit()
    found = [audit.step(r) for r in table.records()]
    alerts = [d for f in found for d in f.discrepancies]
    assert [d.what for d in alerts] == ["rules"]
    assert "firebet.pays was" in alerts[0].detail and "firebet.max_wager was 5, now 7" in (
        alerts[0].detail
    )
    table.close()


# -- clear-halt after a forged snapshot --------------------------------------------------------
ENGINE = Engine()


def rolls_journal(path: Path, rolls: int, snapshot_every: int) -> None:
    with Journal(path, snapshot_every=snapshot_every) as journal:
        replayed = recover(journal, ENGINE.rules).replay
        decide(journal, replayed, Bet(1, 5, actor="alice"))
        for i in range(rolls):
            decide(journal, replayed, Roll(1 + i % 6, 1 + (i * 5) % 6, seq=i))


def forge(path: Path, record: int, *, reseal: bool) -> None:
    """Put 5 points and $5 on 16 positions in the snapshot of ``record``; with ``reseal``,
    seal the record again with the table's key (a forger who has the key)."""
    db = sqlite3.connect(path)
    (text,) = db.execute("SELECT state FROM snapshots WHERE record = ?", (record,)).fetchone()
    state = json.loads(text)
    state["points"], state["bets"] = [4, 5, 6, 8, 9], {str(p): 5 for p in range(1, 17)}
    forged = canonical(state)
    db.execute("UPDATE snapshots SET state = ? WHERE record = ?", (forged, record))
    if reseal:
        key = read_key(path.with_name("journal.key"))
        row = db.execute(
            "SELECT record, at, actor, kind, body FROM records WHERE record = ?", (record,)
        ).fetchone()
        (prev,) = db.execute("SELECT mac FROM records WHERE record = ?", (record - 1,)).fetchone()
        mac = seal(key, prev, *row, forged)
        db.execute("UPDATE records SET mac = ? WHERE record = ?", (mac, record))
    db.commit()
    db.close()


def test_clear_halt_after_a_forged_snapshot_resumes_on_every_acked_roll(tmp_path: Path) -> None:
    # the newest record's snapshot forged without the key and with it, and one in the middle
    for reseal, rolls, forged_at in ((False, 34, 36), (True, 34, 36), (False, 44, 30)):
        state = tmp_path / f"{reseal}-{rolls}"
        rolls_journal(state / "journal.db", rolls, 6)
        proven = ENGINE.run(
            [Bet(1, 5), *(Roll(1 + i % 6, 1 + (i * 5) % 6, seq=i) for i in range(rolls))]
        )
        forge(state / "journal.db", forged_at, reseal=reseal)
        checked = run_firebet("journal", "verify", "--state-dir", str(state))
        assert checked.returncode == 4 and f"record {forged_at}" in checked.stderr
        with Journal(state / "journal.db", snapshot_every=6) as journal:
            if recover(journal, ENGINE.rules).halted is None:  # recovery read past it: the full
                journal.halt(forged_at, "the snapshot disagrees")  # check halts, as a service's
        done = run_firebet(
            "clear-halt", "--state-dir", str(state), "--note", "forged snapshot", "--yes"
        )
        assert done.returncode == 0, done.stderr
        assert "set aside no records" in done.stdout
        assert f"snapshot(s) at record {forged_at}" in done.stdout
        with Journal(state / "journal.db", snapshot_every=6) as journal:
            recovered = recover(journal, ENGINE.rules)
            assert recovered.halted is None
            # every ACKed roll counts, and none of the forgery
            assert recovered.state == proven and recovered.state.meters == proven.meters
            assert recovered.state.rolls == rolls and recovered.state.bets == proven.bets
            assert verify(journal, ENGINE.rules).ok
        again = run_firebet("journal", "verify", "--state-dir", str(state))
        assert again.returncode == 0 and "set aside by clear-halt" in again.stdout


def test_a_rules_record_that_differs_from_the_config_never_halts(tmp_path: Path) -> None:
    """A journal made under one pay table and read under another checks clean and recalls
    what was paid (the offline tools, whose config is today's)."""
    nj = load_config(None)
    table = TableJournal(tmp_path / "journal.db", config=nj)
    table.do("bet 3 5", "2 2", "2 2", "2 3", "2 3", "3 3", "3 3", "4 4", "4 4", "5 5", "3 4")
    table.close()
    house = tmp_path / "house.toml"
    house.write_text(HOUSE + '[journal]\nkey_file = "journal.key"\n')
    done = run_firebet("journal", "verify", "--state-dir", str(tmp_path), "--config", str(house))
    assert done.returncode == 0, done.stderr
    history = run_firebet(
        "history", "--json", "--state-dir", str(tmp_path), "--config", str(house), "--hands", "2"
    )
    first = json.loads(history.stdout.splitlines()[0])
    assert (first["odds_to_one"], first["payouts"]) == (24, {"3": 120})
    assert FireBetRules(pays={4: 30}).odds_for(4) == (4, 30)  # the house would pay 150
