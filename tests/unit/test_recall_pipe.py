"""The recall workers' pipe (``recall.Pipe``): whole messages however the bytes come, a
clear end, and a length no message has is refused rather than waited for."""

from __future__ import annotations

import os
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.service.recall import FRAME, MAX_MESSAGE, Pipe

messages = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.binary(max_size=200_000),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(messages, min_size=1, max_size=5))
def test_every_message_comes_whole_and_in_order(sent: list[object]) -> None:
    r, w = os.pipe()
    reading, writing = Pipe(r), Pipe(w)
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.extend(reading.recv() for _ in sent))
    reader.start()  # a message longer than the pipe's buffer is read while it is written
    try:
        for message in sent:
            writing.send(message)
        reader.join(timeout=60)
        assert got == sent
    finally:
        writing.close()
        reader.join(timeout=60)
        reading.close()


def test_the_end_of_the_pipe_is_eof_even_inside_a_message() -> None:
    r, w = os.pipe()
    os.write(w, FRAME.pack(10) + b"12345")  # half a message, then the writer is gone
    os.close(w)
    reading = Pipe(r)
    assert reading.poll(1.0)
    with pytest.raises(EOFError):
        reading.recv()
    reading.close()
    reading.close()  # once only: a second close closes nothing else


def test_a_length_no_message_has_is_refused_not_waited_for() -> None:
    r, w = os.pipe()
    os.write(w, FRAME.pack(MAX_MESSAGE + 1))
    reading = Pipe(r)
    with pytest.raises(OSError, match="bytes on the worker's pipe"):
        reading.recv()
    reading.close()
    os.close(w)


def test_nothing_to_read_is_not_ready() -> None:
    r, w = os.pipe()
    reading = Pipe(r)
    assert not reading.poll(0.01)
    reading.close()
    os.close(w)
