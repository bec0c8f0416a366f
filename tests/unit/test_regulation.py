"""One test per paragraph of N.J.A.C. 13:69F-1.12 (shared/seeds), named after it."""

from __future__ import annotations

from controller.core.events import NewDifferentPoint, SurveillanceAlert
from tests.support import Table, make_points


def test_a1_fire_bet_placed_before_new_shooters_first_come_out_roll() -> None:
    t = Table().do("bet 1 5")
    assert t.state.bets == {1: 5}
    t.do("6 5", "bet 2 5")
    assert t.refusal() == "position 2: betting is closed: the come-out roll was thrown"
    assert t.state.bets == {1: 5}


def test_a1_wager_on_a_numbered_position_of_the_layout() -> None:
    t = Table(positions=16).do("bet 16 1")
    assert t.state.bets == {16: 1}
    t.do("bet 17 1")
    assert t.refusal() == "position 17 is not on this layout (1 to 16)"
    t.do("bet 0 1")
    assert t.refusal() == "position 0 is not on this layout (1 to 16)"


def test_a2_surrender_before_loser_7_pending_bet_settles_at_successors_loser_7() -> None:
    t = Table().do("bet 4 5", "6 6", make_points(4, 5, 6), "surrender compulsory")
    assert t.settlements == []
    assert t.state.surrender_pending and t.state.bets == {4: 5}
    assert t.state.shooter == 2 and t.state.hand == 1
    t.do(make_points(8), "4 4", "3 4")  # successor makes 8, then sevens out on 8
    (settled,) = t.settlements
    assert settled.hand == 1
    assert settled.points == (4, 5, 6, 8)
    assert settled.payouts == {4: 5 * 24}


def test_a3_bets_brought_in_and_kept_until_lost_or_paid() -> None:
    t = Table().do("bet 2 3", "bet 7 5", "bet 1 1", "6 5", make_points(9))
    assert list(t.state.bets) == [2, 7, 1]
    assert t.state.bets == {1: 1, 2: 3, 7: 5}
    t.do("4 4", "4 3")
    assert t.state.bets == {}
    (settled,) = t.settlements
    assert list(settled.wagers) == [1, 2, 7]  # numerical order at settlement


def test_a4_marker_inscribed_with_count_of_different_points_on_the_point_made() -> None:
    t = Table().do("6 5", make_points(10, 4, 8))
    assert t.state.markers() == {10: 1, 4: 2, 8: 3}
    new = [e for e in t.events if isinstance(e, NewDifferentPoint)]
    assert [(e.point, e.ordinal) for e in new] == [(10, 1), (4, 2), (8, 3)]


def test_a5_fire_bets_collected_or_paid_upon_loser_7() -> None:
    t = Table().do("bet 1 5", "bet 2 1", make_points(4, 5, 6, 8), "2 1", "6 6", "5 6")
    assert t.settlements == []  # craps and naturals on the come-out settle nothing
    t.do("5 4", "4 3")
    (settled,) = t.settlements
    assert settled.result == "win" and settled.odds_to_one == 24
    assert settled.payouts == {1: 120, 2: 24}


def test_a5_fewer_than_four_points_lose_at_loser_7() -> None:
    t = Table().do("bet 1 5", make_points(4, 5, 6), "4 4", "4 3")
    (settled,) = t.settlements
    assert settled.result == "lose" and settled.odds_to_one == 0
    assert settled.payouts == {1: 0}


def test_a6_surveillance_notified_once_five_different_points_are_made() -> None:
    t = Table().do("bet 1 5", make_points(4, 5, 6, 8))
    assert not t.state.surveillance_alert
    t.do(make_points(9))
    assert t.state.surveillance_alert
    alerts = [e for e in t.events if isinstance(e, SurveillanceAlert)]
    assert [(a.hand, a.unique_points) for a in alerts] == [(1, 5)]
    t.do(make_points(9, 10))  # a repeat and the 6th point do not raise it again
    assert len([e for e in t.events if isinstance(e, SurveillanceAlert)]) == 1


def test_b1_minimum_1_maximum_5_in_whole_dollar_increments() -> None:
    t = Table().do("bet 1 1", "bet 2 5")
    assert t.state.bets == {1: 1, 2: 5}
    t.do("bet 3 6")
    assert t.refusal() == "position 3: $6 is over the $5 maximum"
    t.do("bet 2 1")
    assert t.refusal() == "position 2: $1 more makes $6, which is over the $5 maximum"
    t2 = Table(min_wager=2, max_wager=10, wager_increment=2).do("bet 1 3")
    assert t2.refusal() == "position 1: $3 is not in $2 increments"
    t2.do("bet 1 1")
    assert t2.refusal() == "position 1: $1 is under the $2 minimum"


def test_b2_same_point_made_more_than_once_does_not_increment_the_count() -> None:
    t = Table().do(make_points(6, 6, 6, 8, 6))
    assert t.state.points == (6, 8)
    assert t.state.unique_points == 2


def test_b3_points_required_to_win_in_no_specific_order() -> None:
    a = Table().do("bet 1 5", make_points(4, 5, 6, 8), "2 2", "3 4")
    b = Table().do("bet 1 5", make_points(8, 6, 5, 4), "2 2", "3 4")
    assert a.settlements[0].payouts == b.settlements[0].payouts == {1: 120}
    assert a.settlements[0].points == (4, 5, 6, 8)
    assert b.settlements[0].points == (8, 6, 5, 4)
