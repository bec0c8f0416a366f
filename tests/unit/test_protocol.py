"""The control socket's wire format: every line is either a request or a reason (#9)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.control.protocol import (
    DEFAULT_DEADLINE_MS,
    MAX_DEPTH,
    MAX_DIGITS,
    BadRequest,
    EncodedReply,
    Identity,
    Message,
    Request,
    Role,
    encode,
    parse_request,
    request_digest,
)
from controller.core.commands import parse_request_tag as parse_tag


def test_a_full_request() -> None:
    line = b'{"op": "bet", "args": {"position": 3, "amount": 5}, "id": "a1", "deadline_ms": 900}'
    assert parse_request(line) == Message("bet", {"position": 3, "amount": 5}, "a1", 900)
    assert parse_request(b'{"op":"status"}') == Message("status", {}, None, DEFAULT_DEADLINE_MS)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"op": "bet", "args": {"amount": ' + b"9" * 5000 + b"}}", "number too large: 5000"),
        (b"[" * 50_000 + b"]" * 50_000, "nested deeper than 8 levels"),
        (b'{"op": "ping", "id": "\\ud800"}', '"id" must be a whole number or a string'),
        (b'{"op": "bet", "args": {"note": "\\udfff"}}', "lone surrogate U+DFFF in the request"),
        (b'{"op": "ping", "\\ud800": 1}', "lone surrogate U+D800 in a key"),
        (b'{"op": "st\xe9tus"}', "not UTF-8: byte 0xE9 at position 10"),
        (b'{"op": "bet", "args": {"amount": 1.5}}', 'number "1.5": only whole numbers'),
        (b'{"op": "bet", "args": {"amount": NaN}}', "NaN is not a number JSON knows"),
        (b'{"op": "bet", "args": {"amount": 1e999}}', 'number "1e999"'),
        (b'{"op": "bet", "op": "void"}', 'key "op" appears twice'),
        (b'{"op": "bet", "sudo": true}', 'unknown key "sudo"'),
        (b'{"op": "ping", "deadline_ms": 0}', '"deadline_ms" must be a whole number from 1'),
        (b'{"op": "ping", "deadline_ms": true}', '"deadline_ms" must be a whole number from 1'),
        (b'{"op": "ping", "id": true}', '"id" must be a whole number or a string'),
        (b'{"op": "ping", "id": ""}', '"id" must be a whole number or a string'),
        (b'{"op": "' + b"x" * 65 + b'"}', '"op" is longer than 64'),
        (b'{"op": ""}', 'missing "op"'),
        (b'"op"', "expected a JSON object"),
        (b"{nope", "not JSON (Expecting property name"),
    ],
)
def test_every_bad_line_is_named(line: bytes, reason: str) -> None:
    with pytest.raises(BadRequest) as caught:
        parse_request(line)
    assert reason in str(caught.value)


def test_the_id_is_kept_for_the_error_reply_when_it_could_be_read() -> None:
    with pytest.raises(BadRequest) as caught:
        parse_request(b'{"op": "bet", "id": 7, "args": [1]}')
    assert caught.value.request_id == 7
    with pytest.raises(BadRequest) as caught:
        parse_request(b'{"op": "bet", "id": "\\ud800"}')
    assert caught.value.request_id is None


def test_depth_limit_is_exact() -> None:
    inner: Any = 1
    for _ in range(MAX_DEPTH - 2):  # the request object and args are two levels
        inner = [inner]
    assert parse_request(json.dumps({"op": "x", "args": {"a": inner}}).encode()).op == "x"
    with pytest.raises(BadRequest, match="nested deeper"):
        parse_request(json.dumps({"op": "x", "args": {"a": [inner]}}).encode())


def test_digits_limit_is_exact() -> None:
    ok = int("9" * MAX_DIGITS)
    assert parse_request(json.dumps({"op": "x", "args": {"n": -ok}}).encode()).args == {"n": -ok}
    with pytest.raises(BadRequest, match="too large"):
        parse_request(json.dumps({"op": "x", "args": {"n": ok * 10}}).encode())


def test_encode_is_ascii_even_for_a_lone_surrogate() -> None:
    line = encode({"ok": False, "error": "bad \ud800 here", "id": "é"})
    assert line.isascii() and line.endswith(b"\n")
    assert json.loads(line)["error"] == "bad \ud800 here"


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_are_a_request_or_a_bad_request(line: bytes) -> None:
    try:
        message = parse_request(line)
    except BadRequest as exc:
        assert str(exc)
    else:
        assert isinstance(message.op, str) and isinstance(message.args, dict)


@settings(max_examples=150, deadline=None)
@given(JSON, st.sampled_from(["op", "args", "id", "deadline_ms", "x"]))
def test_any_json_is_a_request_or_a_bad_request(value: Any, key: str) -> None:
    for body in (value, {"op": "bet", key: value}, {"op": "bet", "args": {"a": value}}):
        try:
            line = json.dumps(body).encode()
        except ValueError:
            continue
        try:
            message = parse_request(line)
        except BadRequest as exc:
            assert str(exc)
        else:
            encode({"ok": True, "id": message.id, "args": message.args})  # repliable


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.text().filter(lambda k: k != "id"), JSON, max_size=5),
    st.none() | st.integers() | st.text(max_size=40),
)
def test_an_encoded_reply_gets_its_id_as_encode_would_write_it(
    body: dict[str, Any], request_id: str | int | None
) -> None:
    """The recall process's replies are spliced, not decoded and encoded again: the line is
    byte for byte what encode() writes for the same reply with its id."""
    reply = EncodedReply(encode(body)[:-1])
    expected = dict(body) if request_id is None else {**body, "id": request_id}
    assert reply.line(request_id) == encode(expected)
    assert json.loads(reply.body) == json.loads(encode(body))


@pytest.mark.parametrize("body", [b"", b"[1]", b'{"a":1}\n{"b":2}', b'"x"'])
def test_an_encoded_reply_is_one_object_on_one_line(body: bytes) -> None:
    with pytest.raises(ValueError, match="one JSON object on one line"):
        EncodedReply(body)


# a request's tag, journaled with its command (a retry after a restart, #9 item 2) ----------
_ids = st.one_of(st.text(min_size=1, max_size=128), st.integers(-(10**18), 10**18))
_args = st.dictionaries(st.sampled_from(["position", "amount", "d1", "kind"]), st.integers())


@given(uid=st.integers(0, 2**32 - 1), op=st.sampled_from(["bet", "void", "roll"]), args=_args,
       rid=_ids)  # fmt: skip
@settings(max_examples=300)
def test_a_request_tag_comes_back_exactly(
    uid: int, op: str, args: dict[str, int], rid: str | int
) -> None:
    who = Identity(uid=uid, gid=0, user="dana")
    tag = Request(op, args, who, Role.DEALER, id=rid).tag
    assert parse_tag(tag) == (uid, request_digest(op, args), rid)
    assert Request(op, args, who, Role.DEALER).tag == ""  # no id: nothing to remember


def test_the_digest_tells_what_was_asked_apart() -> None:
    assert request_digest("bet", {"position": 2, "amount": 1}) == request_digest(
        "bet", {"amount": 1, "position": 2}
    )
    assert request_digest("bet", {"position": 2, "amount": 1}) != request_digest(
        "bet", {"position": 2, "amount": 2}
    )
    assert request_digest("bet", {}) != request_digest("void", {})


@given(st.text(max_size=200))
@settings(max_examples=500)
def test_any_text_is_a_tag_or_none_and_never_raises(text: str) -> None:
    parsed = parse_tag(text)
    if parsed is not None:
        uid, digest, rid = parsed
        assert isinstance(uid, int) and len(digest) == 16 and isinstance(rid, str | int)


@pytest.mark.parametrize("text", ["", "1001", "1001:abc:1", "x:0123456789abcdef:1",
                                  "1:0123456789abcdef:true", "1:0123456789abcdef:[1]",
                                  "1:0123456789abcdef:"])  # fmt: skip
def test_what_is_not_a_tag_is_none(text: str) -> None:
    assert parse_tag(text) is None
