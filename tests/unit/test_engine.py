"""The rules of docs/rules.md, and hypothesis properties of the engine."""

from __future__ import annotations

import json
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.commands import Ack, Bet, Cancel, Command, ReaderHello, Roll, Surrender, Void
from controller.core.config import FireBetRules
from controller.core.engine import Engine, decision_table
from controller.core.events import (
    BettingClosed,
    DuplicateRoll,
    NewHand,
    RollAccepted,
    RollVoided,
    Settlement,
    SurveillanceAlert,
)
from controller.core.state import Phase, TableState, fold
from tests.support import Table, make_points

# -- the hand ------------------------------------------------------------------------


def test_come_out_naturals_and_craps_keep_the_shooter_on_the_come_out() -> None:
    for dice in ("3 4", "5 6", "1 1", "1 2", "6 6"):
        t = Table().do(dice)
        assert t.state.phase is Phase.COME_OUT and t.state.point is None
        assert t.state.shooter == 1


def test_come_out_point_numbers_establish_the_point() -> None:
    for dice, point in (("2 2", 4), ("1 4", 5), ("1 5", 6), ("2 6", 8), ("3 6", 9), ("4 6", 10)):
        t = Table().do(dice)
        assert t.state.phase is Phase.POINT and t.state.point == point


def test_point_made_returns_to_come_out_with_the_same_shooter() -> None:
    t = Table().do("2 2", "1 3")
    assert t.state.phase is Phase.COME_OUT and t.state.shooter == 1 and t.state.points == (4,)


def test_seven_out_ends_the_hand_and_settles() -> None:
    t = Table().do("bet 1 5", "2 2", "3 4")
    assert t.state.phase is Phase.NEW_SHOOTER and t.state.shooter == 2 and t.state.hand == 2
    assert len(t.settlements) == 1 and t.state.betting_open


def test_other_totals_in_the_point_phase_change_nothing() -> None:
    t = Table().do("2 2")
    before = t.state
    for dice in ("1 1", "1 2", "6 6", "5 6", "3 3", "4 4", "4 5", "5 5", "1 4"):
        t.do(dice)
        assert t.state.phase is Phase.POINT and t.state.point == 4
        assert t.state.points == before.points


def test_decision_table_comes_from_the_machine_and_covers_every_roll() -> None:
    table = decision_table()
    assert len(table) == (2 + 6) * 11
    assert table[(Phase.POINT, 6, 7)] == ("seven_out", "new_shooter", None)
    assert table[(Phase.NEW_SHOOTER, None, 7)] == ("natural", "come_out", None)
    assert table[(Phase.COME_OUT, None, 8)] == ("point_established", "point", 8)
    assert table[(Phase.POINT, 6, 6)] == ("point_made", "come_out", None)
    assert table[(Phase.POINT, 6, 8)] == ("no_decision", "point", 6)
    assert table[(Phase.COME_OUT, None, 12)] == ("craps", "come_out", None)


# -- betting window and wagers ------------------------------------------------------


def test_betting_closes_at_first_point_when_configured() -> None:
    t = Table(betting_closes="first_point").do("bet 1 5", "3 4", "bet 2 5", "1 1", "bet 3 1")
    assert t.state.bets == {1: 5, 2: 5, 3: 1}
    t.do("3 3", "bet 4 5")
    assert t.refusal() == "position 4: betting is closed: the first point was established"
    assert any(isinstance(e, BettingClosed) for e in t.events)


def test_fire_bet_cannot_be_called_off_once_betting_has_closed() -> None:
    t = Table().do("bet 1 5", "cancel 1")
    assert t.state.bets == {}
    t.do("bet 1 5", "3 4", "cancel 1")
    assert t.refusal() == (
        "position 1: a fire bet cannot be called off: "
        "betting is closed: the come-out roll was thrown"
    )
    assert t.state.bets == {1: 5}
    t.do("cancel 2")
    assert t.refusal() is not None


def test_cancel_of_an_empty_position_is_refused() -> None:
    assert Table().do("cancel 3").refusal() == "position 3 has no wager"


def test_amounts_are_integers_never_floats() -> None:
    engine = Engine()
    out = engine.apply(TableState(), Bet(1, 2.5))  # type: ignore[arg-type]
    assert out.refused is not None and "not a dollar amount" in out.refused.reason


def test_mini_craps_has_nine_positions() -> None:
    t = Table(positions=9).do("bet 9 5", "bet 10 5")
    assert t.refusal() == "position 10 is not on this layout (1 to 9)"
    assert t.state.bets == {9: 5}


# -- settlement -----------------------------------------------------------------------


def test_nj_pay_table_four_five_six_points() -> None:
    for points, odds in ((4, 24), (5, 249), (6, 999)):
        made = (4, 5, 6, 8, 9, 10)[:points]
        t = Table().do("bet 1 5", "bet 2 1", make_points(*made), "3 3", "4 3")
        (s,) = t.settlements
        assert (s.result, s.odds_to_one, s.unique_points) == ("win", odds, points)
        assert s.payouts == {1: 5 * odds, 2: odds}
        assert s.report()["payouts"] == {"1": 5 * odds, "2": odds}


def test_three_tier_table_pays_three_points() -> None:
    t = Table(pays={3: 6, 4: 29, 5: 149, 6: 299}).do("bet 1 5", make_points(4, 5, 6), "3 3", "1 6")
    (s,) = t.settlements
    assert (s.odds_to_one, s.payouts) == (6, {1: 30})


def test_pay_six_immediately_pays_at_the_sixth_point_and_the_loser_7_adds_nothing() -> None:
    t = Table(pay_six_immediately=True).do("bet 2 5", make_points(4, 5, 6, 8, 9, 10))
    (s,) = t.settlements
    assert s.immediate and s.payouts == {2: 4995} and t.state.bets == {}
    t.do("3 3", "3 4")
    assert len(t.settlements) == 1
    assert t.state.hand == 2


def test_settlement_without_wagers_still_reports_the_hand() -> None:
    t = Table().do(make_points(4, 5, 6, 8), "2 2", "3 4")
    assert t.settlements[0].report() == {
        "hand": 1,
        "points": [4, 5, 6, 8],
        "unique_points": 4,
        "result": "win",
        "odds_to_one": 24,
        "payouts": {},
    }


# -- surrender ------------------------------------------------------------------------


def test_surrender_without_carrying_points_starts_the_successors_count_again() -> None:
    t = Table(surrender_carries_points=False).do("bet 1 5", make_points(4, 5, 6), "surrender")
    assert t.state.points == () and t.state.bets == {1: 5} and t.state.surrender_pending
    t.do(make_points(8, 9, 10, 4), "2 2", "3 4")
    (s,) = t.settlements
    assert s.points == (8, 9, 10, 4) and s.payouts == {1: 120} and s.hand == 1


def test_no_new_fire_bets_while_a_surrendered_hand_is_pending() -> None:
    t = Table().do("bet 1 5", "3 4", "surrender", "bet 2 5")
    assert t.refusal() == (
        "position 2: betting is closed: the surrendered hand's fire bets are still pending"
    )
    assert t.state.phase is Phase.NEW_SHOOTER


def test_surrender_before_any_roll_leaves_betting_open() -> None:
    t = Table().do("bet 1 5", "surrender", "bet 2 5")
    assert t.state.bets == {1: 5, 2: 5} and not t.state.surrender_pending
    assert t.state.shooter == 2


def test_surrender_with_no_fire_bet_riding_does_not_block_the_next_shooter() -> None:
    # docs/rules.md, settled questions: nothing rides, so nothing carries; a fresh hand,
    # betting open
    t = Table().do("3 4", "2 2", "2 2", "surrender", "bet 2 5")
    assert t.refusal() is None
    assert t.state.bets == {2: 5} and t.state.betting_open and not t.state.surrender_pending
    assert t.state.points == () and t.state.hand == 2 and t.state.shooter == 2
    t.do("2 2", "3 4")
    (s,) = t.settlements
    assert s.hand == 2 and s.points == () and s.payouts == {2: 0}


def test_surrender_with_no_wager_on_a_point_opens_betting_when_the_point_is_decided() -> None:
    # SPEC section 2, settled questions: the successor throws for the point; his own hand
    # (betting open) starts at his first come-out roll, never with the point known
    for closes in ("first_roll", "first_point"):
        t = Table(betting_closes=closes).do("3 4", "1 3", "surrender", "bet 1 1")
        assert t.refusal() == (
            "position 1: betting is closed: the new shooter throws for the surrendered "
            "point 4; betting opens for his first come-out roll"
        ), closes
        assert t.state.phase is Phase.POINT and t.state.point == 4 and t.state.shooter == 2
        t.do("5 5", "2 2", "bet 1 1")  # no decision, then the point made: his hand opens
        assert t.refusal() is None, closes
        assert t.state.bets == {1: 1} and t.state.points == () and t.state.hand == 2
        assert t.state.shooter == 2 and t.state.phase is Phase.NEW_SHOOTER
        # the seven-out instead: the next shooter's hand opens
        t = Table(betting_closes=closes).do("1 3", "surrender", "3 4", "bet 1 1")
        assert t.refusal() is None and t.state.hand == 2 and t.state.shooter == 3, closes
        assert [s.hand for s in t.settlements] == [1] and t.settlements[0].wagers == {}


def test_surrender_after_a_sixth_point_paid_immediately_starts_a_fresh_hand() -> None:
    t = Table(pay_six_immediately=True).do("bet 1 1", make_points(4, 5, 6, 8, 9, 10))
    assert t.state.settled and t.state.bets == {}
    t.do("surrender", "bet 3 2")
    assert t.refusal() is None and t.state.bets == {3: 2} and t.state.points == ()


def test_surrender_before_any_point_leaves_the_betting_window_as_it_was() -> None:
    t = Table(betting_closes="first_point").do("bet 1 5", "3 4", "surrender", "bet 2 5")
    assert t.refusal() is None
    assert t.state.bets == {1: 5, 2: 5} and t.state.betting_open
    assert not t.state.surrender_pending and t.state.hand == 1
    t = Table().do("surrender", "surrender", "bet 2 5")
    assert t.refusal() is None and t.state.hand == 1 and t.state.shooter == 3
    # with wagers riding and the window closed, the hand carries (docs/rules.md)
    t = Table().do("bet 1 5", "6 5", "surrender", "bet 2 5")
    assert t.refusal() is not None and t.state.surrender_pending and t.state.bets == {1: 5}


def test_surrender_records_voluntary_or_compulsory() -> None:
    engine = Engine()
    out = engine.apply(TableState(), Surrender(kind="compulsory", actor="box"))
    assert out.events[0].to_dict()["surrender"] == "compulsory"
    bad = engine.apply(TableState(), Surrender(kind="sulk"))
    assert bad.refused is not None and "voluntary or compulsory" in bad.refused.reason


def test_surrender_in_the_middle_of_a_point_keeps_the_point() -> None:
    # SPEC section 2: the successor throws for the same point, as in craps
    t = Table().do("bet 1 5", "3 4", "2 2", "surrender")
    assert t.state.point == 4 and t.state.phase is Phase.POINT and t.state.shooter == 2
    assert t.state.surrender_pending and not t.state.finishing_point


def test_after_a_surrender_on_a_point_the_successors_seven_is_the_loser_seven() -> None:
    # issue 30: bet 1 5 / 2 2 / surrender / 3 4 was read as a come-out natural and the
    # $5 rode on; the successor throws for the 4 and the 7 is the loser 7
    t = Table().do("bet 1 5", "2 2", "surrender", "3 4")
    (s,) = t.settlements
    assert s.hand == 1 and s.points == () and s.payouts == {1: 0} and s.wagers == {1: 5}
    assert t.state.hand == 2 and t.state.shooter == 3 and t.state.betting_open


def test_the_successor_making_the_surrendered_point_counts_it_as_any_point_made() -> None:
    for carries in (True, False):
        t = Table(surrender_carries_points=carries).do("bet 1 5", make_points(5), "2 2")
        t.do("surrender", "1 3")  # the successor makes the 4
        assert t.state.points == ((5, 4) if carries else (4,)), carries
        assert t.state.phase is Phase.COME_OUT and t.state.surrender_pending
        # and a point he makes again after a surrender counts once
        t.do("2 2", "surrender", "2 2")
        assert t.state.points == ((5, 4) if carries else (4,)), carries


# -- void ----------------------------------------------------------------------------


def test_void_restores_the_state_before_the_roll() -> None:
    t = Table().do("bet 1 5", make_points(4, 5), "3 3")
    before = t.state
    t.do("1 5", "void")
    assert t.state == before


def test_void_of_a_seven_out_reverses_the_settlement() -> None:
    t = Table().do("bet 1 5", make_points(4, 5, 6, 8), "3 3")
    before = t.state
    t.do("3 4")
    assert len(t.settlements) == 1
    t.do("void")
    voided = [e for e in t.events if isinstance(e, RollVoided)]
    assert voided[0].reversed_settlement == t.settlements[0]
    assert t.state == before and t.state.bets == {1: 5}
    assert t.state.meters.reversed.count == 1 and t.state.meters.paid == {}


def test_void_only_the_last_roll_and_not_after_a_wager() -> None:
    t = Table().do("3 4", "void", "void")
    assert t.refusal() is not None and t.refusal().startswith("nothing to void")  # type: ignore[union-attr]
    t = Table().do("2 2", "3 4", "bet 1 5", "void")
    assert t.refusal() is not None and t.state.bets == {1: 5}


def test_void_after_an_acknowledgement_keeps_the_acknowledgement() -> None:
    t = Table().do(make_points(4, 5, 6, 8, 9), "ack", "3 3", "ack")
    assert t.refusal() == "there is no surveillance alert to acknowledge"
    t = Table().do(make_points(4, 5, 6, 8), "5 5", "5 5")
    assert t.state.surveillance_alert
    t.do("ack", "void")
    assert not t.state.surveillance_alert and t.state.points == (4, 5, 6, 8)


# -- reader sequence --------------------------------------------------------------------


def test_a_retransmitted_roll_is_applied_once() -> None:
    engine = Engine()
    s = engine.apply(TableState(), Roll(2, 2, seq=17)).state
    again = engine.apply(s, Roll(2, 2, seq=17))
    assert again.events == (DuplicateRoll(17),) and again.state == s
    s = engine.apply(s, ReaderHello(seq=0)).state
    assert engine.apply(s, Roll(2, 2, seq=17)).state.points == (4,)


def test_dice_out_of_range_are_refused() -> None:
    out = Engine().apply(TableState(), Roll(7, 1))
    assert out.refused is not None and out.refused.reason == "die 1 shows 7: a die shows 1 to 6"


# -- properties ------------------------------------------------------------------------

dice = st.integers(1, 6)
rolls = st.builds(Roll, dice, dice, source=st.just("script"))
commands: st.SearchStrategy[Command] = st.one_of(
    rolls,
    rolls,
    rolls,
    rolls,
    st.builds(Bet, st.integers(0, 17), st.integers(0, 7)),
    st.builds(Cancel, st.integers(0, 17)),
    st.builds(Void),
    st.builds(Surrender, kind=st.sampled_from(["voluntary", "compulsory"])),
    st.builds(Ack),
)
rules_strategy = st.builds(
    FireBetRules,
    positions=st.integers(1, 16),
    pays=st.sampled_from([{4: 24, 5: 249, 6: 999}, {3: 6, 4: 29, 5: 149, 6: 299}]),
    pay_six_immediately=st.booleans(),
    surrender_carries_points=st.booleans(),
    surveillance_at=st.integers(1, 6),
    betting_closes=st.sampled_from(["first_roll", "first_point"]),
)


@settings(max_examples=150, deadline=None)
@given(rules_strategy, st.lists(commands, max_size=120))
def test_property_fold_of_events_is_the_state(rules: FireBetRules, cmds: list[Command]) -> None:
    engine = Engine(rules)
    state = TableState()
    events = []
    for c in cmds:
        out = engine.apply(state, c)
        state = out.state
        events.extend(out.events)
    folded = fold(events)
    assert folded == state
    assert folded.to_dict() == state.to_dict()  # meters, undo buffer and reader seq too
    assert (
        TableState.from_dict(json.loads(json.dumps(state.to_dict()))).to_dict() == state.to_dict()
    )


@settings(max_examples=150, deadline=None)
@given(rules_strategy, st.lists(commands, max_size=120), rolls)
def test_property_void_after_a_roll_restores_the_exact_previous_state(
    rules: FireBetRules, cmds: list[Command], roll: Roll
) -> None:
    engine = Engine(rules)
    state = engine.run(cmds)
    after = engine.apply(state, roll)
    voided = engine.apply(after.state, Void())
    assert voided.refused is None
    assert voided.state == state


@settings(max_examples=100, deadline=None)
@given(st.lists(commands, max_size=150))
def test_property_count_bounded_monotone_ordinals_and_alert_once(cmds: list[Command]) -> None:
    engine = Engine()
    state = TableState()
    alerts: dict[int, int] = {}
    for c in cmds:
        out = engine.apply(state, c)
        if not isinstance(c, Void) and out.state.hand == state.hand:
            assert out.state.unique_points >= state.unique_points
        state = out.state
        assert state.unique_points <= 6
        assert sorted(state.markers().values()) == list(range(1, state.unique_points + 1))
        assert len(set(state.points)) == len(state.points)
        for e in out.events:
            if isinstance(e, SurveillanceAlert):
                alerts[e.hand] = alerts.get(e.hand, 0) + 1
    if not any(isinstance(c, Void) for c in cmds):  # a void may take an alert back
        assert all(n == 1 for n in alerts.values())


@settings(max_examples=100, deadline=None)
@given(rules_strategy, st.lists(commands, max_size=150))
def test_property_a_settlement_happens_exactly_at_each_loser_7(
    rules: FireBetRules, cmds: list[Command]
) -> None:
    engine = Engine(rules)
    state = TableState()
    for c in cmds:
        out = engine.apply(state, c)
        kinds = [type(e) for e in out.events]
        seven_out = any(
            isinstance(e, RollAccepted) and e.outcome == "seven_out" for e in out.events
        )
        sixth = any(isinstance(e, Settlement) and e.immediate for e in out.events)
        if seven_out:
            assert NewHand in kinds
            assert (Settlement in kinds) == (not state.settled)
        elif isinstance(c, Surrender) and out.refused is None:
            # a surrender starts a new hand exactly when no fire bet rides on a closed
            # window and no point is on (with one on, the successor throws for it first)
            assert (NewHand in kinds) == (
                not state.bets and not state.betting_open and state.point is None
            )
            assert Settlement not in kinds
            assert out.state.point == state.point  # the point is never thrown away
        elif state.finishing_point and any(
            isinstance(e, RollAccepted) and e.outcome == "point_made" for e in out.events
        ):
            # the surrendered shooter's point made, nothing riding: the successor's hand
            assert NewHand in kinds and Settlement not in kinds
            assert out.state.shooter == state.shooter and out.state.betting_open
        else:
            assert NewHand not in kinds
            assert (Settlement in kinds) == sixth
            if sixth:
                assert rules.pay_six_immediately and out.state.unique_points == 6
        state = out.state


@settings(max_examples=50, deadline=None)
@given(rules_strategy, st.lists(commands, max_size=100))
def test_property_replay_is_deterministic(rules: FireBetRules, cmds: list[Command]) -> None:
    a = Engine(rules).run(cmds)
    b = Engine(replace(rules)).run(cmds)
    assert a.to_dict() == b.to_dict()
