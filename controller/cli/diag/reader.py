"""``firebet diag reader``: the raw reader monitor, one line per frame, then a summary."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from typing import Any, TextIO

from controller.cli import options
from controller.cli.diag.terminal import emit, stop_on_sigterm
from drivers.codec import (
    DEFAULT_PROTOCOL,
    VERDICTS,
    Frame,
    FrameDecoder,
    FrameName,
    Nak,
    encode_ack,
    nak_for,
)


def nak_words(nak: Nak, sent: bool) -> str:
    """``  -> NAK,0,PROTOCOL (...)``: what the controller answers a frame it cannot take."""
    return f"  -> {'answered' if sent else 'the service answers'} {nak.describe()}"


def frame_line(frame: Frame) -> str:
    """A readable line for one frame."""
    if frame.ok:
        detail = f"seq {frame.seq}"
        if frame.dice is not None:
            detail += f"  dice {frame.dice[0]} {frame.dice[1]}"
        rest = ",".join(frame.fields[2:]) if frame.name is not FrameName.ROLL else ""
        if frame.name is FrameName.HELLO:  # what the reader says it is (status shows it too)
            rest = f"model {frame.text(2)}  firmware {frame.text(3)}"
            if len(frame.fields) > 4:
                rest += f"  protocol {frame.text(4)}"
        if rest:
            detail += f"  {rest}"
        return f"{frame.verdict:<12} {frame.name or '?':<6} {detail}"
    return f"{frame.verdict:<12} {frame.name or '?':<6} {frame.raw!r}"


def monitor_reader(
    port: Any,
    out: TextIO,
    *,
    as_json: bool = False,
    count: int | None = None,
    ack: bool = False,
    stop: threading.Event | None = None,
    protocol: int = DEFAULT_PROTOCOL,
) -> tuple[dict[str, int], str | None]:
    """Print frames from an open ``port`` until ``count`` frames, ``stop`` or Ctrl-C.

    A frame the service would answer with a NAK is named with its NAK (``--ack``: and
    answered). Returns the counts per verdict and the error that ended it (a lost port),
    if any.
    """
    stop = stop if stop is not None else threading.Event()
    decoder = FrameDecoder(protocol=protocol)
    seen = 0
    error: str | None = None
    try:
        while not stop.is_set() and (count is None or seen < count):
            try:
                data: bytes = port.read(1)
                if data and port.in_waiting:
                    data += port.read(port.in_waiting)
            except OSError as exc:
                error = f"serial port lost: {exc}; check the reader's cable and power"
                break
            for frame in decoder.feed(data):
                seen += 1
                nak = nak_for(frame, protocol)
                if nak is not None and ack:  # --ack answers as the service does
                    with contextlib.suppress(OSError):
                        port.write(nak.frame())
                if as_json:
                    line = frame.to_json()
                    if nak is not None:
                        line["nak"] = nak.to_json()
                    emit(out, json.dumps(line))
                else:
                    emit(out, frame_line(frame) + (nak_words(nak, ack) if nak else ""))
                if ack and frame.ok and frame.name is FrameName.ROLL and frame.seq is not None:
                    with contextlib.suppress(OSError):
                        port.write(encode_ack(frame.seq, protocol, frame.session))
                if count is not None and seen >= count:
                    break
    except KeyboardInterrupt:
        pass
    return dict(decoder.counters), error


def summary_line(counters: dict[str, int], as_json: bool) -> str:
    """The last line of ``diag reader``."""
    summary = {v: counters.get(v, 0) for v in VERDICTS}
    if as_json:
        return json.dumps({"summary": summary})
    return "summary: " + ", ".join(f"{v} {n}" for v, n in summary.items())


def run_reader(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """``firebet diag reader``."""
    from drivers.serial_reader import open_port

    out = out if out is not None else sys.stdout
    cfg = options.load(args)
    url = args.serial or cfg.reader.port
    protocol = args.protocol if args.protocol is not None else cfg.reader.protocol
    port = open_port(url, cfg.reader.baud, timeout=0.1)  # exclusive: refused beside the service
    started = time.monotonic()
    stop = threading.Event()
    try:
        with stop_on_sigterm(stop):
            counters, error = monitor_reader(
                port,
                out,
                as_json=args.json,
                count=args.count,
                ack=args.ack,
                stop=stop,
                protocol=protocol,
            )
    finally:
        with contextlib.suppress(Exception):
            port.close()
    emit(out, summary_line(counters, args.json))
    if error is not None:
        print(f"firebet: {url}: {error}", file=sys.stderr)
        return 1
    if not any(counters.values()):
        print(
            f"firebet: warning: nothing at all came from {url} ({time.monotonic() - started:.1f} s"
            f" at {cfg.reader.baud} baud): check the reader's power and cable, reader.port "
            "and reader.baud",
            file=sys.stderr,
        )
        return 1
    return 0
