"""Issue 33: the reader's model and firmware in ``status`` say how the service knows them now
(their HELLO heard since this start, protocol 3's session heard since, or only the journal's
word), so a reader restarted unheard while the service was down is never shown as running
the journal's firmware. The service on a pty: tests/integration/test_reader_contract.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from controller.core.commands import ReaderHello, Roll
from controller.core.engine import Engine
from controller.core.state import TableState
from controller.journal import Journal, recover, store
from controller.journal.play import decide
from controller.service.status import reader_identity
from drivers.codec import encode_hb
from drivers.session import ReaderSession

OURS, OTHER = "1A2B3C4D", "5E6F7A8B"
SAID = replace(TableState(), reader_model="DR-7", reader_firmware="2.1.0", reader_session=OURS)


def test_a_hello_heard_this_run_is_the_readers_now() -> None:
    got = reader_identity(SAID, {}, record=12, heard=True)
    assert got == {
        "model": "DR-7",
        "firmware": "2.1.0",
        "firmware_seen": "this_run",
        "firmware_record": 12,
    }


def test_a_hello_only_the_journal_holds_is_said_to_be_the_journals() -> None:
    got = reader_identity(SAID, {"session": OURS, "session_heard": False}, record=12, heard=False)
    assert (got["firmware"], got["firmware_seen"], got["firmware_record"]) == (
        "2.1.0",
        "journal",
        12,
    )


def test_its_session_heard_since_this_start_proves_the_same_reader_start() -> None:
    heard = {"session": OURS, "session_heard": True}
    assert reader_identity(SAID, heard, record=12, heard=False)["firmware_seen"] == "session"
    # a session the driver holds that is not the HELLO's (never in a running service)
    other = {"session": OTHER, "session_heard": True}
    assert reader_identity(SAID, other, record=12, heard=False)["firmware_seen"] == "journal"


def test_no_hello_named_them() -> None:
    got = reader_identity(TableState(), {}, record=None, heard=False)
    assert got == {"model": None, "firmware": None, "firmware_seen": None, "firmware_record": None}


def test_the_session_is_heard_only_from_a_frame_of_it() -> None:
    session = ReaderSession(protocol=3)
    session.resume(OURS)  # the journal's, at start
    session.opened(0.0)
    assert session.counters()["session_heard"] is False
    session.receive(encode_hb(0, 3, OTHER), 0.1)  # a frame of another session: not ours
    assert session.counters()["session_heard"] is False
    session.receive(encode_hb(0, 3, OURS), 0.2)
    assert session.counters()["session_heard"] is True
    session.resume(OTHER)  # a new start holds nothing heard yet
    assert session.counters()["session_heard"] is False


def test_a_start_reads_back_a_bounded_stretch_for_the_last_hello(tmp_path: Path) -> None:
    """The HELLO's record is looked for among the newest records only (a start's cost must
    not grow with a journal whose reader has not restarted for months): beyond the bound,
    none is named (status then says "as of the journal")."""
    engine = Engine()
    with Journal(tmp_path / "journal.db") as journal:
        replayed = recover(journal, engine.rules).replay
        decide(journal, replayed, ReaderHello(seq=0, model="DR-7", firmware="2.1.0"))
        hello = journal.last_record
        for n in range(6):
            decide(journal, replayed, Roll(1 + n % 6, 2, seq=n + 1, actor="reader"))
        with journal.view() as db:
            assert store.last_hello(db, "DR-7", "2.1.0", within=7) == hello
            assert store.last_hello(db, "DR-7", "2.1.0", within=6) is None
            assert store.last_hello(db, "DR-7", "9.9.9", within=7) is None
        assert journal.last_hello("DR-7", "2.1.0") == hello  # the default bound: far enough
