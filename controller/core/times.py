"""The journal's time text: milliseconds since 1970-01-01 UTC, written as
``2026-11-30T08:15:00.123+00:00``. Pure formatting and parsing; the clock that reads the
time is :mod:`controller.clock`, outside the rules core."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_ms(text: str) -> int | None:
    """Milliseconds since the epoch of an ISO 8601 time (no zone = UTC); None if unreadable."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


@lru_cache(maxsize=8)
def _day(days: int) -> str:
    return datetime.fromtimestamp(days * 86_400, UTC).strftime("%Y-%m-%d")


_last: tuple[int, str] = (-1, "")  # the time written last (a roll's is written four times)
_minute: tuple[int, str] = (-1, "")  # the minute written last, as its text
_SECONDS = tuple(f"{s:02d}" for s in range(60))
_MILLIS = tuple(f".{m:03d}+00:00" for m in range(1000))


def iso(ms: int) -> str:
    """The ISO 8601 text of ``ms`` (UTC, milliseconds), as the service writes times.

    The date is the day's text, kept for the few days a walk meets (strftime a record
    was most of a journal check's time, and a cache by the second grew without end);
    the text up to the minute is kept for the next time (a journal's records come
    seconds apart, so a walk mostly writes the seconds alone), and the seconds and
    milliseconds are looked up.
    The last time written is kept: a record's time is written for its command, its seal
    and its record."""
    global _last, _minute
    last = _last
    if last[0] == ms:
        return last[1]
    minute, rest = divmod(ms, 60_000)
    kept = _minute
    if kept[0] != minute:
        kept = _minute = (minute, _minute_text(minute))
    second, milli = divmod(rest, 1000)
    text = kept[1] + _SECONDS[second] + _MILLIS[milli]
    _last = (ms, text)
    return text


def _minute_text(minute: int) -> str:
    """``YYYY-MM-DDTHH:MM:`` of the minute ``minute`` (minutes since the epoch)."""
    days, of_day = divmod(minute, 1440)
    return "%sT%02d:%02d:" % (_day(days), of_day // 60, of_day % 60)  # noqa: UP031


def _iso(ms: int) -> str:
    """:func:`iso` without anything kept (the reference the tests hold it to)."""
    seconds, rest = divmod(ms, 1000)
    days, second = divmod(seconds, 86_400)
    return "%sT%02d:%02d:%02d.%03d+00:00" % (  # noqa: UP031 - faster than f"{x:02d}"
        _day(days), second // 3600, second // 60 % 60, second % 60, rest
    )  # fmt: skip
