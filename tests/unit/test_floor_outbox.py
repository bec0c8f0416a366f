"""The floor link's window: the cursor moves over the acknowledged front only."""

from __future__ import annotations

import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.reasoncodes import ReasonCode

from controller.link.cursor import Cursor
from controller.link.outbox import Window

TAKEN = ReasonCode(PacketTypes.PUBACK, identifier=0)
REFUSED = ReasonCode(PacketTypes.PUBACK, identifier=0x87)  # not authorized


def test_the_cursor_waits_for_the_records_ahead() -> None:
    window = Window(3)
    for mid, record in ((11, 1), (12, 2), (13, 3)):
        window.add(mid, record, f"chain-{record}")
    assert window.room() == 0
    assert window.ack(12, TAKEN) is None
    assert window.advance(Cursor()) is None  # record 1 is still out
    assert window.ack(11, TAKEN) is None
    assert window.advance(Cursor()) == Cursor(2, "chain-2")
    assert len(window) == 1 and window.room() == 2


def test_a_refused_record_is_named_and_unknown_mids_are_ignored() -> None:
    window = Window(2)
    window.add(5, 7, "chain-7")
    assert window.ack(99, TAKEN) is None  # the online message, say
    assert window.ack(5, REFUSED) == 7
    assert window.advance(Cursor(6, "chain-6")) is None
    window.clear()
    assert len(window) == 0 and window.room() == 2


def test_a_window_holds_one_record_at_least() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Window(0)
