"""The fire-bet rules besides the roll: wagers (bet, cancel), the settlement's pay,
surveillance's confirmation, surrender and void. Each is a pure function of the table's
rules, the state and the command, giving the events it causes (a :class:`Refused` when
it may not).
"""

from __future__ import annotations

from controller.core.commands import SURRENDER_KINDS, Bet, Cancel, Confirm, Surrender, Void
from controller.core.config import FireBetRules
from controller.core.errors import Refusal
from controller.core.events import (
    BetAccepted,
    BetCancelled,
    CorrectionArmed,
    Event,
    HandResult,
    NewHand,
    Refused,
    RollVoided,
    Settlement,
    Surrendered,
    SurveillanceConfirmed,
)
from controller.core.state import TableState


def is_int(v: object) -> bool:
    """A whole number and not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def betting_closed_reason(rules: FireBetRules, state: TableState) -> str:
    """Why betting is closed, in a dealer's words."""
    if state.surrender_pending:
        return "betting is closed: the surrendered hand's fire bets are still pending"
    if state.finishing_point:
        return (
            f"betting is closed: the new shooter throws for the surrendered point "
            f"{state.point}; betting opens for his first come-out roll"
        )
    if state.settled:
        return "betting is closed: this hand's fire bets were already paid"
    if rules.betting_closes == "first_point":
        return "betting is closed: the first point was established"
    return "betting is closed: the come-out roll was thrown"


def settlement(
    odds_by_count: list[tuple[int, int]],
    state: TableState,
    points: tuple[int, ...],
    *,
    immediate: bool,
) -> Settlement:
    """The settlement of the hand's wagers for ``points`` (``odds_by_count``: the pay
    table's (tier, odds to one) by the number of different points)."""
    return settle(odds_by_count, state.hand, state.bets, points, immediate=immediate)


def settle(
    odds_by_count: list[tuple[int, int]],
    hand: int,
    bets: dict[int, int],
    points: tuple[int, ...],
    *,
    immediate: bool,
) -> Settlement:
    """The settlement of ``hand`` with ``bets`` riding, for ``points``: each position
    paid its wager times the tier's odds, or nothing below the first tier."""
    tier, odds = odds_by_count[len(points)]
    win = odds > 0
    wagers = dict(sorted(bets.items()))
    return Settlement(
        hand=hand,
        points=points,
        unique_points=len(points),
        result=HandResult.WIN if win else HandResult.LOSE,
        odds_to_one=odds,
        tier=tier,
        payouts={p: (a * odds if win else 0) for p, a in wagers.items()},
        wagers=wagers,
        immediate=immediate,
    )


def _position_problem(rules: FireBetRules, position: object) -> str | None:
    if not is_int(position) or not 1 <= position <= rules.positions:  # type: ignore[operator]
        return f"position {position!r} is not on this layout (1 to {rules.positions})"
    return None


def bet(rules: FireBetRules, state: TableState, cmd: Bet) -> list[Event]:
    """A wager placed or raised at a position, within the limits, while betting is open."""
    pending = correction_pending("bet", state)
    if pending:
        return pending
    problem = _position_problem(rules, cmd.position)
    if problem:
        return [Refused("bet", problem, Refusal.NO_SUCH_POSITION)]
    if not is_int(cmd.amount) or cmd.amount <= 0:
        return [
            Refused(
                "bet",
                f"position {cmd.position}: {cmd.amount!r} is not a dollar amount",
                Refusal.NOT_AN_AMOUNT,
            )
        ]
    if not state.betting_open:
        return [
            Refused(
                "bet",
                f"position {cmd.position}: {betting_closed_reason(rules, state)}",
                Refusal.BETTING_CLOSED,
            )
        ]
    have = state.bets.get(cmd.position, 0)
    total = have + cmd.amount
    what = f"${total}" if not have else f"${cmd.amount} more makes ${total}, which"
    if total > rules.max_wager:
        return [
            Refused(
                "bet",
                f"position {cmd.position}: {what} is over the ${rules.max_wager} maximum",
                Refusal.OVER_MAXIMUM,
            )
        ]
    if total < rules.min_wager:
        return [
            Refused(
                "bet",
                f"position {cmd.position}: {what} is under the ${rules.min_wager} minimum",
                Refusal.UNDER_MINIMUM,
            )
        ]
    if total % rules.wager_increment:
        return [
            Refused(
                "bet",
                f"position {cmd.position}: {what} is not in ${rules.wager_increment} increments",
                Refusal.NOT_IN_INCREMENTS,
            )
        ]
    return [BetAccepted(cmd.position, cmd.amount, total, actor=cmd.actor, at=cmd.at)]


def cancel(rules: FireBetRules, state: TableState, cmd: Cancel) -> list[Event]:
    """A position's wager called off, only while betting is open."""
    pending = correction_pending("cancel", state)
    if pending:
        return pending
    problem = _position_problem(rules, cmd.position)
    if problem:
        return [Refused("cancel", problem, Refusal.NO_SUCH_POSITION)]
    if not state.betting_open:
        return [
            Refused(
                "cancel",
                f"position {cmd.position}: a fire bet cannot be called off: "
                + betting_closed_reason(rules, state),
                Refusal.BETTING_CLOSED,
            )
        ]
    amount = state.bets.get(cmd.position)
    if amount is None:
        return [Refused("cancel", f"position {cmd.position} has no wager", Refusal.NO_WAGER)]
    return [BetCancelled(cmd.position, amount, actor=cmd.actor, at=cmd.at)]


def confirm(state: TableState, cmd: Confirm) -> list[Event]:
    """Surveillance confirms an alerted hand: any hand whose alert the table keeps
    (:meth:`TableState.alerts`), once; refused naming why for any other."""
    if not is_int(cmd.hand):
        return [Refused("confirm", f"{cmd.hand!r} is not a hand number", Refusal.BAD_COMMAND)]
    if not isinstance(cmd.by, str) or not cmd.by.strip():
        return [
            Refused("confirm", "a confirmation must name who confirmed (by)", Refusal.BAD_COMMAND)
        ]
    kept = dict(state.alerts())
    if cmd.hand not in kept:
        return [Refused("confirm", _not_kept(state, cmd.hand), Refusal.NO_ALERT)]
    by = kept[cmd.hand]
    if by is not None:
        return [
            Refused(
                "confirm",
                f"hand {cmd.hand} was already confirmed by {by}",
                Refusal.ALREADY_CONFIRMED,
            )
        ]
    return [SurveillanceConfirmed(cmd.hand, cmd.by, str(cmd.id), actor=cmd.actor, at=cmd.at)]


def _not_kept(state: TableState, hand: int) -> str:
    """Why ``hand`` has no alert to confirm, in surveillance's words."""
    alerts = state.alerts()
    if not alerts:
        return (
            f"hand {hand} has no surveillance alert to confirm (no alert was raised at this table)"
        )
    if len(alerts) == 1:  # as the table has always said it
        return (
            f"hand {hand} has no surveillance alert to confirm "
            f"(the alert is for hand {alerts[0][0]})"
        )
    hands = ", ".join(str(h) for h, _ in alerts)
    if hand < alerts[0][0]:
        return (
            f"hand {hand} has no surveillance alert the table keeps: it keeps the alerts "
            f"of hands {hands} (the newest {len(alerts)}); clear an older one on the floor "
            "with a note"
        )
    return f"hand {hand} has no surveillance alert to confirm (the alerts are for hands {hands})"


def surrender(rules: FireBetRules, state: TableState, cmd: Surrender) -> list[Event]:
    """The shooter gives up the dice; what happens to the fire bets (SPEC §2)."""
    waiting = correction_pending("surrender", state)
    if waiting:
        return waiting
    if cmd.kind not in SURRENDER_KINDS:
        return [
            Refused(
                "surrender",
                f"a surrender is voluntary or compulsory, not {cmd.kind!r}",
                Refusal.BAD_COMMAND,
            )
        ]
    # with wagers riding and betting closed the hand waits for the successor's loser 7;
    # with betting still open the window stays as it was (SPEC §2, settled questions)
    pending = bool(state.bets) and not state.betting_open
    events: list[Event] = [
        Surrendered(
            surrender=cmd.kind,
            shooter=state.shooter + 1,
            pending=pending,
            carries_points=rules.surrender_carries_points,
            actor=cmd.actor,
            at=cmd.at,
        )
    ]
    if not state.bets and not state.betting_open and state.point is None:
        # no fire bet riding: nothing carries, the successor starts a new fire-bet hand
        # (with a point on he throws for it first: the hand starts when it is decided)
        events.append(NewHand(state.hand + 1, state.shooter + 1))
    return events


def correction_pending(command: str, state: TableState) -> list[Event]:
    """Refused while a void waits for the true dice of the roll it undid (none else)."""
    if state.correcting is None:
        return []
    d1, d2 = state.correcting
    return [
        Refused(
            command,
            f"a correction is pending: the roll read as {d1} {d2} was voided and waits for "
            "its true dice (firebet correct D1 D2)",
            Refusal.CORRECTION_PENDING,
        )
    ]


def void(state: TableState, cmd: Void) -> list[Event]:
    """The last accepted roll reversed, its settlement with it (``arm``: and a correction
    armed, waiting for its true dice)."""
    if state.undo is None or state.last_roll is None:
        return [
            Refused(
                "void",
                "nothing to void: no roll was accepted since the last void, wager or surrender",
                Refusal.NOTHING_TO_VOID,
            )
        ]
    d1, d2 = state.last_roll
    voided = RollVoided(
        d1, d2, reversed_settlement=state.last_settlement, actor=cmd.actor, at=cmd.at
    )
    if cmd.arm:
        return [voided, CorrectionArmed(d1, d2, actor=cmd.actor, at=cmd.at)]
    return [voided]
