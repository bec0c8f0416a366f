"""The reader frame codec: examples from docs/reader-protocol.md and hypothesis properties."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drivers import codec
from drivers.codec import (
    MAX_FRAME,
    VERDICTS,
    Frame,
    FrameDecoder,
    checksum,
    encode,
    encode_ack,
    encode_fault,
    encode_hb,
    encode_hello,
    encode_noroll,
    encode_ok,
    encode_roll,
)


def decode(data: bytes) -> list[Frame]:
    return FrameDecoder().feed(data)


def framed(body: bytes, ck: str | None = None) -> bytes:
    """A frame around raw ``body`` bytes, with the right checksum unless ``ck`` is given."""
    return b"$" + body + b"*" + (ck or checksum(body)).encode() + b"\r\n"


# -- examples ----------------------------------------------------------------------------


def test_worked_example_checksum() -> None:
    # protocol 1: R^O^L^L^,^1^7^,^3^,^4 = 0x30 (the example in docs/reader-protocol.md)
    assert checksum("ROLL,17,3,4", 1) == "30"
    assert encode("ROLL,17,3,4", 1) == b"$ROLL,17,3,4*30\r\n"
    assert encode_roll(17, 3, 4, 1) == b"$ROLL,17,3,4*30\r\n"
    # protocol 2 (the default): CRC-16/CCITT-FALSE, the docs' second example
    assert checksum("ROLL,17,3,4") == "A00F"
    assert encode_roll(17, 3, 4) == b"$ROLL,17,3,4*A00F\r\n"


def test_every_frame_name_decodes() -> None:
    data = (
        encode_hello(0, "DR5", "2.1")
        + encode_roll(1, 6, 1)
        + encode_noroll(2, "COCKED")
        + encode_hb(3)
        + encode_fault(4, "CAMERA")
        + encode_ok(5)
        + encode_ack(65535)
    )
    frames = decode(data)
    assert [f.verdict for f in frames] == ["ok"] * 7
    assert [f.name for f in frames] == ["HELLO", "ROLL", "NOROLL", "HB", "FAULT", "OK", "ACK"]
    assert [f.seq for f in frames] == [0, 1, 2, 3, 4, 5, 65535]
    assert frames[1].dice == (6, 1)
    assert frames[0].fields == ("HELLO", "0", "DR5", "2.1", "2")
    assert frames[4].text(2) == "CAMERA"
    assert frames[1].to_json() == {"verdict": "ok", "kind": "ROLL", "seq": 1, "dice": [6, 1]}
    assert frames[3].to_json() == {"verdict": "ok", "kind": "HB", "seq": 3, "dice": None}


def test_lowercase_checksum_is_accepted_and_line_end_may_be_bare_lf() -> None:
    body = b"ROLL,9,2,5"
    frame = b"$" + body + b"*" + checksum(body).lower().encode() + b"\n"
    assert decode(frame)[0].verdict == "ok"


@pytest.mark.parametrize(
    ("data", "verdict", "name"),
    [
        (framed(b"ROLL,17,3,4", "31"), "bad_checksum", "ROLL"),
        (framed(b"ROLL,17,7,4"), "bad_value", "ROLL"),
        (framed(b"ROLL,17,0,4"), "bad_value", "ROLL"),
        (framed(b"HB,65536"), "bad_value", "HB"),
        (framed(b"ROLL,17,3"), "bad_frame", "ROLL"),
        (framed(b"ROLL,17,3,4,5"), "bad_frame", "ROLL"),
        (framed(b"ROLL,x,3,4"), "bad_frame", "ROLL"),
        (framed(b"ROLL,17,3,-4"), "bad_frame", "ROLL"),
        (framed(b"ROLL,,3,4"), "bad_frame", "ROLL"),
        (framed(b"FAULT,4,"), "bad_frame", "FAULT"),
        (framed(b"SPIN,1"), "bad_frame", None),
        (b"$ROLL,17,3,4\r\n", "bad_frame", "ROLL"),  # no checksum
        (b"$ROLL,17,3,4*3\r\n", "bad_frame", "ROLL"),  # one digit
        (b"$ROLL,17,3,4*3G\r\n", "bad_frame", "ROLL"),
        (framed(b"ROLL,17,3\xe9,4"), "non_ascii", None),
        (framed(b"HB,\t1"), "non_ascii", None),
        (b"$" + b"A" * 100 + b"\r\n", "overlong", None),
    ],
)
def test_bad_input_verdicts(data: bytes, verdict: str, name: str | None) -> None:
    decoder = FrameDecoder()
    frames = decoder.feed(data)
    assert [(f.verdict, f.name) for f in frames] == [(verdict, name)]
    assert frames[0].seq is None and frames[0].dice is None
    assert decoder.counters[verdict] == 1
    assert sum(decoder.counters.values()) == 1


def test_longest_frame_is_accepted_one_more_byte_is_overlong() -> None:
    base = "NOROLL,1,"
    longest = base + "X" * (MAX_FRAME - 6 - len(base))
    assert len(encode(longest)) == MAX_FRAME + 2
    assert decode(encode(longest))[0].verdict == "ok"
    with pytest.raises(ValueError):
        encode(longest + "X")
    too_long = framed((longest + "X").encode())
    assert [f.verdict for f in decode(too_long)] == ["overlong"]


def test_overlong_resyncs_at_next_dollar() -> None:
    decoder = FrameDecoder()
    frames = decoder.feed(b"$" + b"9" * 500 + encode_roll(3, 2, 2))
    assert [f.verdict for f in frames] == ["overlong", "ok"]
    assert frames[1].dice == (2, 2)
    assert decoder.buffered == 0


def test_bytes_before_dollar_are_skipped_and_counted() -> None:
    decoder = FrameDecoder()
    frames = decoder.feed(b"\x00\xff noise\r\n" + encode_hb(1))
    assert [f.verdict for f in frames] == ["ok"]
    assert decoder.skipped == 10


def test_frame_cut_by_next_dollar_is_never_ok() -> None:
    # a complete-looking frame without its line end, then another frame
    frames = decode(encode_hb(1)[:-2] + encode_hb(2))
    assert [(f.verdict, f.seq) for f in frames] == [("bad_frame", None), ("ok", 2)]


def test_encode_refuses_what_it_cannot_frame() -> None:
    for body in ("A*B", "A$B", "tab\there", "é"):
        with pytest.raises(ValueError):
            encode(body)
    with pytest.raises(ValueError):
        encode_roll(1, 7, 1)
    with pytest.raises(ValueError):
        encode_hb(65536)


# -- properties --------------------------------------------------------------------------

text_field = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="$*,"),
    min_size=1,
    max_size=8,
)
seqs = st.integers(0, 65535)
die = st.integers(1, 6)

valid_frames = st.one_of(
    st.builds(encode_hello, seqs, text_field, text_field),
    st.builds(encode_roll, seqs, die, die),
    st.builds(encode_noroll, seqs, text_field),
    st.builds(encode_hb, seqs),
    st.builds(encode_fault, seqs, text_field),
    st.builds(encode_ok, seqs),
    st.builds(encode_ack, seqs),
)


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=78))
def test_encode_then_decode_round_trips_any_body(body: str) -> None:
    if "$" in body or "*" in body:
        with pytest.raises(ValueError):
            encode(body)
        return
    frames = decode(encode(body))
    assert len(frames) == 1
    frame = frames[0]
    assert frame.verdict != "bad_checksum" and frame.verdict != "non_ascii"
    assert frame.fields == tuple(body.split(","))
    assert frame.raw == encode(body)


@given(seqs, die, die)
def test_roll_round_trip(seq: int, d1: int, d2: int) -> None:
    [frame] = decode(encode_roll(seq, d1, d2))
    assert (frame.verdict, frame.name, frame.seq, frame.dice) == ("ok", "ROLL", seq, (d1, d2))


@given(st.lists(st.tuples(st.binary(max_size=120), valid_frames), max_size=12), st.binary())
@settings(max_examples=300)
def test_valid_frames_survive_any_garbage_between_them(
    pieces: list[tuple[bytes, bytes]], tail: bytes
) -> None:
    data = b"".join(garbage + frame for garbage, frame in pieces) + tail
    expected = [frame for _, frame in pieces]
    decoder = FrameDecoder()
    got = [f.raw for f in decoder.feed(data) if f.ok]
    # every valid frame comes out intact and in order (garbage may hold frames of its own)
    it = iter(got)
    assert all(any(raw == frame for raw in it) for frame in expected)
    assert decoder.buffered <= MAX_FRAME + 1


@given(st.lists(valid_frames | st.binary(max_size=40), max_size=10), st.data())
def test_split_writes_decode_the_same(chunks: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(chunks)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    whole = FrameDecoder()
    expected = whole.feed(stream)
    split = FrameDecoder()
    got: list[Frame] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        got.extend(split.feed(stream[start:end]))
    assert got == expected
    assert split.counters == whole.counters


@given(st.lists(st.binary(max_size=300), max_size=20))
@settings(max_examples=300)
def test_random_bytes_never_raise_and_the_buffer_stays_bounded(chunks: list[bytes]) -> None:
    decoder = FrameDecoder()
    total = 0
    for chunk in chunks:
        for frame in decoder.feed(chunk):
            assert frame.verdict in VERDICTS
            assert len(frame.raw) <= MAX_FRAME + 2
            if frame.ok:
                assert frame.name in codec.FIELD_COUNTS and frame.seq is not None
            total += 1
        assert decoder.buffered <= MAX_FRAME + 1
    assert sum(decoder.counters.values()) == total


@given(st.binary(max_size=200).map(lambda b: b.replace(b"$", b"")), valid_frames)
def test_garbage_without_dollar_is_only_skipped(garbage: bytes, frame: bytes) -> None:
    decoder = FrameDecoder()
    frames = decoder.feed(garbage + frame)
    assert [f.raw for f in frames] == [frame]
    assert decoder.skipped == len(garbage)


def byte_at_a_time(decoder: FrameDecoder, data: bytes) -> list[Frame]:
    """The decoder's rule as written before it cut whole runs (#31): one byte at a time."""
    out: list[Frame] = []
    buf = decoder._buf
    for b in data:
        if b == ord("$"):
            if decoder._in_frame:
                out.append(codec._cut_short(bytes(buf), decoder.protocol))
            buf[:] = b"$"
            decoder._in_frame = True
        elif not decoder._in_frame:
            decoder.skipped += 1
        else:
            buf.append(b)
            if b == ord("\n"):
                out.append(codec.parse_line(bytes(buf), decoder.protocol))
                buf.clear()
                decoder._in_frame = False
            elif len(buf) > MAX_FRAME and not (len(buf) == MAX_FRAME + 1 and b == ord("\r")):
                out.append(Frame(codec.Verdict.OVERLONG, raw=bytes(buf)))
                buf.clear()
                decoder._in_frame = False
    for frame in out:
        decoder.counters[frame.verdict] += 1
    return out


# frames at the edge of MAX_FRAME: bodies that end a byte before, at and after it, with
# and without the \r the limit leaves room for, and bytes that are not printable
edges = st.builds(
    lambda n, junk, end: b"$" + b"A" * n + junk + end,
    st.integers(MAX_FRAME - 4, MAX_FRAME + 3),
    st.sampled_from([b"", b"\x00", b"\x80", b"*1F"]),
    st.sampled_from([b"", b"\r", b"\n", b"\r\n"]),
)


@given(
    st.lists(valid_frames | edges | st.binary(max_size=40), max_size=12),
    st.data(),
    st.sampled_from(codec.PROTOCOLS),
)
@settings(max_examples=400)
def test_runs_cut_as_the_byte_rule_cuts(
    chunks: list[bytes], data: st.DataObject, protocol: int
) -> None:
    """feed() finds each $ and line end with bytes.find (no Python work a byte, #31): it
    gives the frames, counters, skipped bytes and held bytes the byte-by-byte rule gives,
    however the stream is cut into reads."""
    stream = b"".join(chunks)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    reference = FrameDecoder(protocol=protocol)
    expected = byte_at_a_time(reference, stream)
    decoder = FrameDecoder(protocol=protocol)
    got: list[Frame] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        got.extend(decoder.feed(stream[start:end]))
    assert got == expected
    assert decoder.counters == reference.counters
    assert decoder.skipped == reference.skipped
    assert decoder.buffered == reference.buffered


@pytest.mark.parametrize("protocol", codec.PROTOCOLS)
def test_a_read_cut_just_after_the_limit_s_cr_moves_on(protocol: int) -> None:
    """A frame as long as the limit allows, its ``\\r`` the last byte of one read and its
    ``\\n`` the first of the next: the decoder judged the new read's last byte as the
    frame's and never moved on (#31, found by the property above after it hung CI for 90
    minutes). A reader on a line that cut reads there would have stopped reading rolls.
    The feed runs in a thread the test waits for, so a regression fails, not hangs."""
    first = b"$" + b"A" * (MAX_FRAME - 1) + b"\r"  # MAX_FRAME bytes and the \r it allows
    second = b"\n" + encode_hb(7) + b"x"  # the line end, a heartbeat, a byte after
    expected = byte_at_a_time(FrameDecoder(protocol=protocol), first + second)
    decoder = FrameDecoder(protocol=protocol)
    got: list[Frame] = []

    def feed() -> None:
        got.extend(decoder.feed(first))
        got.extend(decoder.feed(second))

    reader = threading.Thread(target=feed, daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "the decoder never moved past the line end"
    assert got == expected and len(got) == 2
