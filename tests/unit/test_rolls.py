"""The roll rule and its fast paths (``controller/core/rolls.py``) are one rule: the roll path
(one roll), a run of rolls folded at once and the replay's sweep over script lines each give
the same state (undo buffer, meters and last settlement included), events and settlements
as the rule's full decision folded roll by roll, and decline only what the full decision
must decide."""

from __future__ import annotations

import tracemalloc
from dataclasses import replace

from hypothesis import example, given, settings
from hypothesis import strategies as st

from controller.core.commands import Bet, Command, ReaderHello, Roll, Surrender, Void
from controller.core.config import FireBetRules
from controller.core.engine import Engine
from controller.core.events import (
    BettingClosed,
    NewDifferentPoint,
    NewHand,
    RollAccepted,
    Settlement,
    SurveillanceAlert,
)
from controller.core.rolls import DICE_LINES
from controller.core.script import Replayer, parse_line
from controller.core.state import Phase, TableState, fold
from tests.support import DICE
from tests.unit.test_engine import commands, dice, rules_strategy

# -- one roll, and a run of rolls folded at once ------------------------------------------


@settings(max_examples=100, deadline=None)
@given(rules_strategy, st.lists(commands, max_size=120))
def test_property_an_engine_that_has_seen_the_rolls_decides_as_a_fresh_one(
    rules: FireBetRules, cmds: list[Command]
) -> None:
    warm = Engine(rules)
    warm.run(cmds)  # the common rolls' events are now looked up, not made
    fresh = Engine(rules)
    a = b = TableState()
    for c in cmds:
        out_warm, out_fresh = warm.apply(a, c), fresh.apply(b, c)
        assert out_warm.events == out_fresh.events
        assert out_warm.state.to_dict() == out_fresh.state.to_dict()
        a, b = out_warm.state, out_fresh.state
    timed = [replace(c, at="2026-11-30T09:00:00") if isinstance(c, Roll) else c for c in cmds]
    assert fresh.run(timed) == warm.run(cmds)  # a time is never looked up, same game


def test_a_roll_of_floats_or_bools_is_refused_even_when_its_event_was_made_before() -> None:
    engine = Engine()
    s = engine.apply(engine.apply(TableState(), Roll(2, 2)).state, Roll(3, 3)).state
    for bad in (Roll(3.0, 3), Roll(3, 3.0), Roll(True, 1)):  # type: ignore[arg-type]
        assert engine.apply(s, bad).refused is not None


# every source a roll comes from, with and without a reader seq (repeats are duplicates or
# conflicts) and a time: the roll path (Engine._move) against the full decision and fold
any_rolls = st.builds(
    Roll,
    dice,
    dice,
    source=st.sampled_from(["reader", "reader", "manual", "script", "sim"]),
    seq=st.one_of(st.none(), st.integers(0, 6)),
    at=st.sampled_from(["", "2026-11-30T09:00:00.000+00:00"]),
)
mixed: st.SearchStrategy[Command] = st.one_of(
    any_rolls, any_rolls, any_rolls, any_rolls, commands, st.builds(ReaderHello, seq=st.just(0))
)


@settings(max_examples=200, deadline=None)
@given(rules_strategy, st.lists(mixed, max_size=150))
def test_property_the_roll_path_is_the_fold_of_the_events_it_gives(
    rules: FireBetRules, cmds: list[Command]
) -> None:
    engine = Engine(rules)
    state = TableState()
    for c in cmds:
        out = engine.apply(state, c)
        decided = engine.decide(state, c)
        assert list(out.events) == decided
        folded = fold(decided, state)
        assert out.state == folded and out.state.to_dict() == folded.to_dict()
        advanced = engine.advance(state, c)
        assert advanced.to_dict() == out.state.to_dict()
        # the folded run's path, one roll long (a seven-out included): the same state, and
        # the seven-out's settlement, when it made one, is the state's last settlement
        ran, end = engine.advance_moves(state, [c])
        if end:
            assert ran == out.state and ran.to_dict() == out.state.to_dict()
            paid = [e for e in out.events if isinstance(e, Settlement)]
            assert ran.last_settlement == (paid[0] if paid else None)
        if out.state.undo is not None:
            assert out.state.undo.undo is None  # the undo buffer never chains
        state = out.state


script_rolls = st.builds(Roll, dice, dice, source=st.sampled_from(["script", "sim"]))


@settings(max_examples=200, deadline=None)
@given(
    rules_strategy,
    st.lists(commands, max_size=60),
    st.lists(st.one_of(script_rolls, script_rolls, script_rolls, mixed), max_size=60),
)
def test_property_a_run_of_moving_rolls_is_folded_as_one_by_one(
    rules: FireBetRules, first: list[Command], cmds: list[Command]
) -> None:
    engine = Engine(rules)
    state = engine.run(first)
    start = 0
    moving = {RollAccepted, BettingClosed, NewDifferentPoint}
    while start < len(cmds):
        got, end = engine.advance_moves(state, cmds, start)
        expected = state
        seven_out = False
        for c in cmds[start:end]:
            assert not seven_out  # a seven-out is the run's last roll
            out = engine.apply(expected, c)
            kinds = {type(e) for e in out.events}
            seven_out = NewHand in kinds
            # a seven-out settles the hand (unless paid at the 6th point) and starts the next
            assert kinds <= (moving | {Settlement, NewHand} if seven_out else moving)
            expected = out.state
        assert got == expected and got.to_dict() == expected.to_dict()
        assert got.last_settlement == expected.last_settlement
        if end < len(cmds) and not seven_out:  # else it stops only at what does not move
            c = cmds[end]
            out = engine.apply(got, c)
            assert (
                not isinstance(c, Roll)
                or c.source not in ("script", "sim", "reader")
                or not {type(e) for e in out.events}
                <= {RollAccepted, BettingClosed, NewDifferentPoint}
            )
            got, end = out.state, end + 1
        state, start = got, end


def test_a_run_ends_with_its_seven_out_settled_as_one_by_one_and_can_be_voided() -> None:
    engine = Engine()
    state = engine.apply(TableState(), Bet(1, 5)).state
    hand = [Roll(2, 2, "script"), Roll(1, 3, "script"), Roll(3, 3, "script")]  # 4 made, 6 set
    seven = [Roll(5, 3, "script"), Roll(4, 3, "script")]  # 8: no decision; the seven-out
    after = [Roll(2, 2, "script"), Roll(6, 6, "script")]  # the next shooter's rolls
    cmds = hand + seven + after
    got, end = engine.advance_moves(state, cmds)
    expected = engine.run(cmds[:end], state)
    assert end == 5 and got.phase is Phase.NEW_SHOOTER and got.hand == 2 and got.shooter == 2
    assert got.to_dict() == expected.to_dict() and got.betting_open and not got.bets
    assert got.last_settlement is not None and got.last_settlement.points == (4,)
    assert got.meters.hands == expected.meters.hands == 1
    voided = engine.apply(got, Void())
    assert voided.state.to_dict() == engine.apply(expected, Void()).state.to_dict()
    assert voided.state.hand == 1 and voided.state.bets == {1: 5}
    nxt, stop = engine.advance_moves(got, cmds, end)  # the next run starts after it
    assert stop == len(cmds) and nxt.to_dict() == engine.run(after, got).to_dict()


def test_a_seven_out_after_the_hand_was_paid_at_the_sixth_point_settles_nothing_again() -> None:
    engine = Engine(FireBetRules(pay_six_immediately=True))
    made = [Roll(*DICE[p], "script") for p in (4, 5, 6, 8, 9, 10) for _ in range(2)]
    state = engine.run([Bet(1, 5), *made])
    assert state.settled
    cmds = [Roll(3, 3, "script"), Roll(4, 3, "script")]
    got, end = engine.advance_moves(state, cmds)
    expected = engine.run(cmds, state)
    assert end == 2 and got.to_dict() == expected.to_dict() and got.last_settlement is None
    assert got.hand == expected.hand == state.hand + 1 and not got.settled


def test_a_run_of_moving_rolls_meters_a_point_made_again_and_can_be_voided() -> None:
    engine = Engine()
    six = [Roll(3, 3, "script"), Roll(3, 3, "script")]  # the point 6, made: a new point
    again = [Roll(4, 2, "script"), Roll(5, 1, "script"), Roll(2, 2, "script")]  # 6 again
    state = engine.run(six)
    got, end = engine.advance_moves(state, again)
    expected = engine.run(again, state)
    assert end == 3 and got.meters.points_made == 2
    assert got.to_dict() == expected.to_dict()
    voided = engine.apply(got, Void()).state
    assert voided.to_dict() == engine.apply(expected, Void()).state.to_dict()
    assert voided == engine.run(again[:2], state)


# -- the replay's sweep over script lines --------------------------------------------------

roll_line = st.builds("{} {}\n".format, st.integers(1, 6), st.integers(1, 6))
other_line = st.sampled_from(
    [b"bet 1 5\n", b"void\n", b"surrender\n", b"ack\n", b"3  4\n", b"# note\n", b"\n", b"6 6"]
)
lines_strategy = st.lists(
    st.one_of(*[roll_line.map(str.encode)] * 6, other_line), min_size=1, max_size=150
)


# each point set and made: 4, 5, 6, 8, 9, 10; then a seven-out
ALL_SIX = [d for d in (b"2 2\n", b"2 3\n", b"3 3\n", b"4 4\n", b"4 5\n", b"5 5\n") for _ in "xx"]
ALL_SIX += [b"6 2\n", b"3 4\n"]


def _one_by_one(engine: Engine, state: TableState, lines: list[bytes]) -> tuple[
    TableState, list[tuple[int, Settlement]]
]:  # fmt: skip
    paid = []
    for i, line in enumerate(lines):
        command = parse_line(line.decode())
        assert isinstance(command, Roll)
        state, events = engine.apply(state, command)
        paid += [(i, e) for e in events if isinstance(e, Settlement)]
    return state, paid


@settings(max_examples=300, deadline=None)
@given(rules_strategy, st.lists(commands, max_size=40), lines_strategy, st.booleans())
@example(FireBetRules(), [], [b"4 4\n", b"1 3\n", b"4 3\n"], False)  # a hand ends: held back
@example(FireBetRules(pay_six_immediately=True), [Bet(1, 5)], ALL_SIX, False)  # the 6th
@example(FireBetRules(), [], [b"4 4\n", b"3 4\n", b"2 2\n", b"3 4\n"], True)  # two hands
def test_a_sweep_is_the_fold_of_its_rolls_one_by_one(
    rules: FireBetRules, first: list[Command], lines: list[bytes], one_hand: bool
) -> None:
    engine = Engine(rules)
    state = engine.run(first)
    i = 0
    while i < len(lines):
        got, end, paid = engine.sweep(state, lines, i, one_hand=one_hand)
        if one_hand:  # to the first seven-out at most, and it ends the sweep
            assert len(paid) <= 1 and all(at == end - 1 for at, _ in paid)
        expected, expected_paid = _one_by_one(engine, state, lines[i:end])
        assert got.to_dict() == expected.to_dict()  # undo, meters, last settlement
        assert got == expected and got.last_settlement == expected.last_settlement
        assert [(at - i, s) for at, s in paid] == expected_paid
        assert all(type(s) is Settlement for _, s in paid)
        # a void after the sweep takes back what it takes back one by one
        voided = engine.apply(got, Void()).state
        assert voided.to_dict() == engine.apply(expected, Void()).state.to_dict()
        if end == i:  # declined: not a plain roll, or one the full decision must decide
            command = parse_line(lines[i].decode())
            if lines[i] in DICE_LINES:  # a plain roll: one the full decision must decide
                assert isinstance(command, Roll)
                out = engine.apply(state, command)
                kinds = {type(e) for e in out.events}
                seven_out = out.state.hand != state.hand or out.state.shooter != state.shooter
                assert (
                    SurveillanceAlert in kinds
                    or any(isinstance(e, Settlement) and e.immediate for e in out.events)
                    # the roll deciding a surrendered point with nothing riding on it
                    or (state.finishing_point and NewHand in kinds)
                    or (
                        seven_out
                        and (
                            state.settled or state.surrender_pending
                            or state.betting_open
                        )
                    )
                ), (lines[i], state, out.events)  # fmt: skip
            got = engine.apply(state, command).state if command is not None else state
            end = i + 1
        state, i = got, end


def test_a_sweep_runs_across_hands_and_holds_the_last_seven_out() -> None:
    engine = Engine()
    hands = [b"4 4\n", b"5 3\n", b"2 2\n", b"3 4\n"] * 3  # 8 set and made, 4 set, seven-out
    state, end, paid = engine.sweep(TableState(), hands)
    assert end == len(hands) and [s.hand for _, s in paid] == [1, 2, 3]
    assert [at for at, _ in paid] == [3, 7, 11] and all(s.points == (8,) for _, s in paid)
    assert state.hand == 4 and state.phase is Phase.NEW_SHOOTER and state.rolls == 12
    assert state.meters.hands == 3 and state.meters.points_made == 3
    assert state.last_settlement is paid[-1][1]  # a void can still take the last one back
    assert state.undo is not None and state.undo.hand == 3 and state.undo.points == (8,)


def test_a_sweep_settles_the_wagers_of_its_first_hand_as_the_engine_does() -> None:
    engine = Engine()
    state = engine.run([Bet(1, 5), Bet(2, 3)])
    lines = [b"4 4\n", b"5 3\n", b"2 2\n", b"3 4\n", b"2 2\n"]  # 8 made, 4, seven-out
    got, end, paid = engine.sweep(state, lines)
    expected, expected_paid = _one_by_one(engine, state, lines)
    assert end == 5 and got.to_dict() == expected.to_dict()
    assert [s for _, s in paid] == [s for _, s in expected_paid]
    ((_, settled),) = paid
    assert settled.wagers == {1: 5, 2: 3} and settled.payouts == {1: 0, 2: 0}
    assert got.meters.lost.amount == 8 and got.bets == {} and got.hand == 2
    # a sweep that ends at the seven-out: the undo holds the wagers, not yet settled
    at_seven, _, _ = engine.sweep(state, lines[:4])
    assert at_seven.undo is not None and at_seven.undo.bets == {1: 5, 2: 3}
    assert at_seven.undo.meters.lost.amount == 0
    assert (
        engine.apply(at_seven, Void()).state.to_dict()
        == engine.run([Void()], _one_by_one(engine, state, lines[:4])[0]).to_dict()
    )
    # and across a second hand, ended by its seven-out: only the first hand had wagers
    two = [*lines[:4], b"2 2\n", b"3 4\n"]
    both, stop, both_paid = engine.sweep(state, two)
    one_by_one, one_by_one_paid = _one_by_one(engine, state, two)
    assert stop == 6 and both.to_dict() == one_by_one.to_dict()
    assert [s for _, s in both_paid] == [s for _, s in one_by_one_paid]
    assert both_paid[1][1].wagers == {} and both.undo is not None
    assert both.undo.meters.lost.amount == 8
    # one hand at a time: the sweep stops after the first seven-out, as one by one
    first, stop, first_paid = engine.sweep(state, two, one_hand=True)
    assert stop == 4 and [at for at, _ in first_paid] == [3]
    assert first.to_dict() == _one_by_one(engine, state, two[:4])[0].to_dict()
    assert first.hand == 2 and first.phase is Phase.NEW_SHOOTER and first.betting_open


def test_a_sweep_leaves_a_surrendered_hands_seven_out_to_the_full_decision() -> None:
    engine = Engine()
    state = engine.run([Bet(1, 5), Roll(4, 4, "script"), Surrender()])
    assert state.surrender_pending
    lines = [b"2 2\n", b"3 4\n"]  # the successor's point, then a seven-out
    _, end, paid = engine.sweep(state, lines)
    assert end == 1 and paid == []


def test_the_sweeps_tables_stay_few_whatever_the_script_length() -> None:
    engine = Engine()

    def peak(count: int) -> int:
        script = [f"{1 + n % 6} {1 + n * 7 % 6}\n".encode() for n in range(count)]
        chunks = [script[k : k + 4096] for k in range(0, count, 4096)]
        tracemalloc.start()
        try:
            for _ in Replayer(engine).run_lines(chunks):
                pass
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    peak(5_000)  # the tables of the situations this script meets, made once
    small, large = peak(5_000), peak(100_000)
    assert large < small + 64_000, (small, large)
