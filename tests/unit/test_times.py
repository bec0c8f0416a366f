"""The journal's time text (controller/core/times.py): ``iso`` keeps the last minute's text
and looks up the seconds; it must write every time as datetime does, in any order."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from controller.core.times import iso, to_ms


def reference(ms: int) -> str:
    seconds, milli = divmod(ms, 1000)
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S") + (
        f".{milli:03d}+00:00"
    )


@given(st.lists(st.integers(0, 4_102_444_800_000), min_size=1, max_size=50), st.data())
def test_iso_writes_every_time_as_datetime_does(starts: list[int], data: st.DataObject) -> None:
    for start in starts:  # jumps, then steps within and across minutes, back and forth
        steps = data.draw(st.lists(st.integers(-120_000, 120_000), max_size=20))
        ms = start
        for step in [0, *steps]:
            ms = max(0, ms + step)
            assert iso(ms) == reference(ms)
            assert to_ms(iso(ms)) == ms
