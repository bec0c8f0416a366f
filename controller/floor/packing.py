"""How the floor's store keeps a record small on disk (#34), both engines alike.

A record's bulky parts are JSON the table wrote (``payload``, ``events``) and the hand
logs the audit sorts them into (``hands.log``): short texts that repeat the same keys and
words. Each is kept as raw DEFLATE against :data:`DICTIONARY` (zlib's preset dictionary:
the keys and words of the table's messages), so even a 60-byte payload shrinks, behind one
version byte (:data:`PACKED`). A chain or snapshot digest (64 hex digits on the wire) is
kept as its 32 bytes. Nothing is lost: :func:`unpack_text` gives back the very text that
was packed, :func:`unpack_digest` the very hex.

A value stored before packing (a floor.db from an earlier version: text) is read as it is,
so an old store needs no migration. The dictionary is part of the store's format: a new
one takes a new version byte, and the old stays readable.
"""

from __future__ import annotations

import zlib

PACKED = 1  # the first byte of a packed text: DEFLATE against DICTIONARY
_LEVEL = 9
_WBITS = -15  # raw DEFLATE: no zlib header or checksum (the store's own pages have theirs)

DICTIONARY = (
    # the hand logs (controller/journal/handlog.py), least likely first
    b'"decided_under":null,"problems":[],"alert_record":null,"confirmations":[],'
    b'"voided":true,"odds_to_one":0,"immediate":false,"payouts":{},"wagers":{},'
    b'"rolls":[[1,1],[2,2],[3,3],[4,4],[5,5],[6,6]],"actions":[{"action":"bet","position":'
    b'"roll_log":[{"record":,"dice":[,"source":"reader","seq":null},"first_record":'
    b'"last_record":,"settled_record":{"hand":,"points":[4,5,6,8,9,10],"unique_points":'
    b'"result":"lose","result":"win",'
    # the rules and system records
    b'{"format":2}{"command":"confirm","hand":,"by":"","id":"","actor":"floor"}'
    b'{"command":"clear_halt","resume_from":{"event":"refused","command":"bet","reason":'
    b'"over_maximum","code":"betting_closed"'
    # the events of a bet and of a roll (controller/core/events.py), most likely last
    b'{"event":"new_point","point":,"ordinal":{"event":"new_hand","hand":,"shooter":'
    b'{"event":"settlement","hand":,"points":[],"unique_points":0,"result":"lose",'
    b'"odds_to_one":0,"tier":0,"payouts":{"1":0},"wagers":{"1":5},"immediate":false},'
    b'{"event":"betting_closed","reason":"the come-out roll was thrown"}'
    b'"outcome":"point_made","outcome":"seven_out","phase":"new_shooter","outcome":"natural",'
    b'"outcome":"craps","outcome":"point_established","phase":"come_out",'
    b'{"amount":5,"at":"2026-01-01T00:00:00.000+00:00","command":"bet","position":1}'
    b'[{"event":"bet","position":1,"amount":5,"total":5,"actor":"dealer","at":"'
    b'{"at":"2026-01-01T00:00:00.000+00:00","command":"roll","d1":1,"d2":1,"source":"reader"}'
    b'[{"event":"roll","d1":1,"d2":1,"total":2,"outcome":"no_decision","phase":"point",'
    b'"point":null,"source":"reader","seq":null,"actor":"dealer","at":"2026-01-01T00:00:00.'
)


def pack_text(text: str) -> bytes:
    """``text`` (JSON the store keeps) as the store writes it: small."""
    out = zlib.compressobj(_LEVEL, zlib.DEFLATED, _WBITS, 9, zlib.Z_DEFAULT_STRATEGY, DICTIONARY)
    return bytes((PACKED,)) + out.compress(text.encode()) + out.flush()


def unpack_text(value: str | bytes | memoryview) -> str:
    """The text :func:`pack_text` packed (or a text stored before packing, as it is)."""
    if isinstance(value, str):
        return value
    data = bytes(value)
    if not data or data[0] != PACKED:
        raise ValueError(f"a packed text of version {data[:1].hex() or 'none'}: not this floor's")
    out = zlib.decompressobj(_WBITS, DICTIONARY)
    return (out.decompress(data[1:]) + out.flush()).decode()


def pack_digest(hex_digest: str) -> bytes:
    """A SHA-256 or HMAC digest (64 lowercase hex digits, as the wire carries it) as its
    32 bytes."""
    return bytes.fromhex(hex_digest)


def unpack_digest(value: str | bytes | memoryview) -> str:
    """The hex digits of a digest :func:`pack_digest` packed (a text stored before
    packing, as it is)."""
    return value if isinstance(value, str) else bytes(value).hex()
