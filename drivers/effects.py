"""Blinking and pulsing lamps from one thread, so changing an effect never waits.

gpiozero's own ``blink()`` and ``pulse()`` start a thread per lamp and stop the old
one with a ``join``: a point made (one marker stops pulsing, another starts) then
waited for two threads on the engine thread, between the journal's commit and the
reader's ACK. :class:`EffectPlayer` plays every moving effect from one long-lived
thread instead. :meth:`EffectPlayer.play` and :meth:`EffectPlayer.hold` only write
the lamp's first value and note the pattern, so the lamp shows its new effect
before the ACK goes out and the engine thread never starts or joins a thread.

A pattern is gpiozero's: a cycle of ``(value, seconds)`` steps; a blink has the same
values at the same times, a pulse the same fade in and out at :data:`FPS` frames a second
(gpiozero's 25 woke the thread 25 times a second while a marker pulsed, most of an idle
table's CPU: SPEC section 7).

A lamp runs PWM only while its pattern dims it (a pulse): held on or off, or blinking
between the two, its pin is written as a plain level with PWM stopped (gpiozero's
``frequency = None``). On a Pi every PWM pin is timed in software, by a thread of the pin
library inside this process (lgpio's wakes at the start of every PWM cycle, 100 a second
a lamp, even at a duty of 0 or 100%): seven lamps always on PWM were some 700 wake-ups a
second of the service's CPU with nothing happening.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FPS = 10  # frames a second of a fade (gpiozero's 25: each frame is a wake-up, SPEC section 7)
PWM_HZ = 100  # a dimmed lamp's PWM frequency (gpiozero's default: no flicker to the eye)


def blink_steps(on_s: float, off_s: float) -> list[tuple[float, float]]:
    """On for ``on_s``, off for ``off_s``."""
    return [(1.0, on_s), (0.0, off_s)]


def dims(steps: list[tuple[float, float]]) -> bool:
    """Whether a pattern shows a lamp between off and fully on (so it needs PWM)."""
    return any(_dimmed(value) for value, _ in steps)


def _dimmed(value: float) -> bool:
    """A lamp value between off and fully on."""
    return 0 < value < 1


def pulse_steps(fade_in_s: float, fade_out_s: float) -> list[tuple[float, float]]:
    """A fade in over ``fade_in_s`` and out over ``fade_out_s`` (gpiozero's ``pulse``;
    a fade shorter than a frame is one step, where gpiozero would spin)."""
    frame = 1 / FPS
    n_in, n_out = int(FPS * fade_in_s), int(FPS * fade_out_s)
    steps = [(i * frame / fade_in_s, frame) for i in range(n_in)]
    if not n_in and fade_in_s > 0:
        steps.append((0.0, fade_in_s))
    steps.append((1.0, 0.0))
    steps += [(1 - i * frame / fade_out_s, frame) for i in range(n_out)]
    if not n_out and fade_out_s > 0:
        steps.append((1.0, fade_out_s))
    steps.append((0.0, 0.0))
    return steps


@dataclass
class _Playing:
    lamp: Any
    steps: list[tuple[float, float]]
    index: int
    due: float  # when the next step starts (monotonic seconds)


def _dimmable(lamp: Any, dimmed: bool) -> None:
    """Start ``lamp``'s PWM when it is to be dimmed, stop it when not (a lamp without PWM,
    the relay, is left alone). The value is written after this by the caller."""
    if not hasattr(lamp, "frequency"):
        return
    if dimmed and lamp.frequency is None:
        lamp.frequency = PWM_HZ
    elif not dimmed and lamp.frequency is not None:
        lamp.frequency = None


class EffectPlayer:
    """Plays blink and pulse patterns on gpiozero output devices from one thread.

    ``clock`` is injectable for tests; the thread starts with the first moving effect.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()  # guards the patterns and the flags below
        # the thread's one wait: a lock released to make it look again (a timed acquire of a
        # bare lock is the cheapest wake-up Python has; a Condition's costs half as much
        # again, and a pulsing marker wakes the thread every frame: SPEC section 7)
        self._kick = threading.Lock()
        self._kick.acquire()
        self._kicked = False
        self._playing: dict[int, _Playing] = {}
        self._stopping = False
        self._thread: threading.Thread | None = None

    def play(self, lamp: Any, steps: list[tuple[float, float]]) -> None:
        """Show ``steps`` on ``lamp`` from now on, cycling (its first value at once)."""
        if not steps or all(seconds <= 0 for _, seconds in steps):
            raise ValueError("a lamp pattern needs a step that lasts")
        with self._lock:
            _dimmable(lamp, dims(steps))  # (the thread writes nothing while the lock is held)
            now = self._clock()
            playing = _Playing(lamp, steps, 0, now)
            self._advance(playing, now)
            self._playing[id(lamp)] = playing
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lamp effects", daemon=True)
                self._thread.start()
            self._poke()

    def hold(self, lamp: Any, value: float | bool) -> None:
        """Stop any pattern on ``lamp`` and hold it at ``value`` (on, off)."""
        with self._lock:
            self._playing.pop(id(lamp), None)
            _dimmable(lamp, _dimmed(value))
            lamp.value = value

    def close(self) -> None:
        """Stop the thread (the lamps keep their last value)."""
        with self._lock:
            self._stopping = True
            self._playing.clear()
            self._poke()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=5)

    def _poke(self) -> None:
        """Make the thread look again (the caller holds the lock)."""
        if not self._kicked:
            self._kicked = True
            self._kick.release()

    def _advance(self, playing: _Playing, now: float) -> None:
        """Write the step ``now`` falls in (skipping steps a late wake-up missed)."""
        steps, index, due = playing.steps, playing.index, playing.due
        value = None
        while due <= now:
            value, seconds = steps[index]
            index = (index + 1) % len(steps)
            due += seconds
            if due <= now and now - due > 60:  # asleep for a minute: start the cycle again
                due = now
        playing.index, playing.due = index, due
        if value is not None:
            playing.lamp.value = value

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stopping:
                    return
                now = self._clock()
                for playing in list(self._playing.values()):
                    if playing.due <= now:
                        self._advance(playing, now)
                wait = None
                if self._playing:
                    wait = max(min(p.due for p in self._playing.values()) - self._clock(), 0.0)
            kicked = self._kick.acquire() if wait is None else self._kick.acquire(timeout=wait)
            if kicked:
                with self._lock:
                    self._kicked = False
