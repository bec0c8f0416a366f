"""NAK: the controller's answer to a frame it cannot take (docs/reader-protocol.md, "NAK";
issue 23): a HELLO of another protocol or of the wrong shape, a sealed frame with the wrong
fields; never a good frame, line noise or an unknown frame."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drivers.codec import (
    FrameDecoder,
    Nak,
    NakReason,
    encode,
    encode_hello,
    encode_nak,
    encode_roll,
    nak_for,
    parse_line,
)


def frame_of(data: bytes, protocol: int = 2):  # type: ignore[no-untyped-def]
    (frame,) = FrameDecoder(protocol=protocol).feed(data)
    return frame


def test_a_hello_of_the_other_protocol_is_answered_in_its_own() -> None:
    old = encode_hello(0, "DR-1", "0.9", protocol=1)
    assert nak_for(frame_of(old, 2), 2) == Nak(0, NakReason.PROTOCOL, 1)
    new = encode_hello(0, "DR-7", "2.1", protocol=2)
    assert nak_for(frame_of(new, 1), 1) == Nak(0, NakReason.PROTOCOL, 2)
    # the NAK is a frame the reader of that protocol reads
    back = parse_line(Nak(0, NakReason.PROTOCOL, 1).frame(), 1)
    assert back.ok and back.fields == ("NAK", "0", "PROTOCOL")
    # any frame of the other protocol: the reader is told, whatever it sends
    assert nak_for(frame_of(encode_roll(7, 3, 4, protocol=1), 2), 2) == Nak(
        7, NakReason.PROTOCOL, 1
    )
    # a HELLO that claims another protocol than it is framed in
    assert nak_for(frame_of(encode("HELLO,0,DR-7,2.1,1")), 2) == Nak(0, NakReason.PROTOCOL, 2)


def test_a_hello_of_the_wrong_shape_is_bad_hello() -> None:
    for body, seq in (
        ("HELLO,0,DR-7,2.1", 0),  # the protocol number left out
        ("HELLO,3,,2.1,2", 3),  # an empty model
        ("HELLO,x,DR-7,2.1,2", 0),  # a seq that is no number
        ("HELLO,70000,DR-7,2.1,2", 0),  # out of range
        ("HELLO,0,DR-7,2.1,2,extra", 0),
    ):
        assert nak_for(frame_of(encode(body)), 2) == Nak(seq, NakReason.BAD_HELLO, 2), body


def test_sealed_frames_of_the_wrong_shape_are_named_good_ones_and_noise_never() -> None:
    assert nak_for(frame_of(encode("ROLL,9,7,1")), 2) == Nak(9, NakReason.BAD_VALUE, 2)
    assert nak_for(frame_of(encode("ROLL,9,3")), 2) == Nak(9, NakReason.BAD_FRAME, 2)
    assert nak_for(frame_of(encode_roll(9, 3, 4)), 2) is None  # a ROLL it can take: ACKed
    assert nak_for(frame_of(encode_hello(0, "DR-7", "2.1")), 2) is None
    assert nak_for(frame_of(encode("SPIN,1")), 2) is None  # unknown: a newer reader's
    assert nak_for(frame_of(encode_nak(1, "X")), 2) is None  # the controller's own
    corrupt = encode_roll(9, 3, 4).replace(b"3,4", b"3,5")
    assert nak_for(frame_of(corrupt), 2) is None  # line noise: the reader repeats it
    cut = FrameDecoder().feed(encode("ROLL,9,7,1")[:-2] + encode_roll(10, 1, 1))[0]
    assert nak_for(cut, 2) is None  # cut short by the next $: not as it was sent


@given(st.binary(max_size=120), st.sampled_from([1, 2]))
def test_property_nak_for_never_raises_and_never_answers_a_good_frame(
    data: bytes, protocol: int
) -> None:
    for frame in FrameDecoder(protocol=protocol).feed(data + b"\r\n"):
        nak = nak_for(frame, protocol)
        assert nak is None or (not frame.ok and 0 <= nak.seq <= 65535)
        if nak is not None:
            assert parse_line(nak.frame(), nak.protocol).ok
