"""The floor's words: alert kinds and statuses, what an audit found, and their colours.

One home for the vocabulary the store, the ingest, the queue, the tiles and the
templates share (the templates read these enums; no module spells a kind or a status
as a bare string). A member is its stored value (``StrEnum``), so the database and the
JSON answers keep the words they always had.
"""

from __future__ import annotations

from enum import StrEnum


class Colour(StrEnum):
    """How an alert is drawn: red (something is wrong with a table's record), yellow (a
    payout to watch), grey (a table unheard)."""

    RED = "red"
    YELLOW = "yellow"
    GREY = "grey"


class AlertKind(StrEnum):
    """What an alert is about; in the order the console's tally lists them."""

    INTEGRITY = "integrity"
    AUDIT = "audit"
    QUARANTINE = "quarantine"
    SURVEILLANCE = "surveillance"
    BACKLOG = "backlog"
    OFFLINE = "offline"

    @property
    def words(self) -> str:
        """The kind in the words of the floor."""
        return _KIND_WORDS[self]

    @property
    def colour(self) -> Colour:
        return _KIND_COLOURS[self]

    @property
    def grouped(self) -> bool:
        """Whether the queue shows a table's open alerts of this kind as one item (every
        5th-point alert is its own item: SPEC section 6, none is hidden by others)."""
        return self is not AlertKind.SURVEILLANCE


_KIND_WORDS = {
    AlertKind.INTEGRITY: "history rewritten",
    AlertKind.AUDIT: "payout check",
    AlertKind.QUARANTINE: "table quarantined",
    AlertKind.SURVEILLANCE: "5th point",
    AlertKind.BACKLOG: "5th points unconfirmed",
    AlertKind.OFFLINE: "table offline",
}
_KIND_COLOURS = {
    AlertKind.INTEGRITY: Colour.RED,
    AlertKind.AUDIT: Colour.RED,
    AlertKind.QUARANTINE: Colour.RED,
    AlertKind.SURVEILLANCE: Colour.YELLOW,
    AlertKind.BACKLOG: Colour.RED,
    AlertKind.OFFLINE: Colour.GREY,
}


class AlertStatus(StrEnum):
    """What became of an alert."""

    OPEN = "open"
    SENT = "sent"  # a confirmation sent to the table, not yet recorded by it
    REFUSED = "refused"  # the table refused the confirmation
    CONFIRMED = "confirmed"  # the table recorded surveillance's confirmation
    CLEARED = "cleared"  # surveillance cleared it with a note
    RESOLVED = "resolved"  # the floor saw it resolved (a table back online)

    @property
    def needs_person(self) -> bool:
        """Whether the alert is still open: someone on the floor has to act on it."""
        return self in OPEN_STATUSES

    @property
    def words(self) -> str:
        return _STATUS_WORDS[self]


OPEN_STATUSES: tuple[AlertStatus, ...] = (AlertStatus.OPEN, AlertStatus.SENT, AlertStatus.REFUSED)
"""The statuses of an alert that still needs a person (the store's queries use these)."""

_STATUS_WORDS = {
    AlertStatus.OPEN: "open",
    AlertStatus.SENT: "confirmation sent",
    AlertStatus.REFUSED: "refused by the table",
    AlertStatus.CONFIRMED: "confirmed",
    AlertStatus.CLEARED: "cleared",
    AlertStatus.RESOLVED: "resolved",
}


class Finding(StrEnum):
    """What an audit alert found (``detail.what`` of an ``audit`` alert)."""

    SETTLEMENT = "settlement"
    MARKERS = "markers"
    ALERT = "alert"
    EVENTS = "events"
    UNREADABLE = "unreadable"
    UNCHECKED = "unchecked"
    RULES = "rules"
    UNAPPROVED = "unapproved"
    RESUME = "resume"

    @property
    def words(self) -> str:
        return _FINDING_WORDS[self]


_FINDING_WORDS = {
    Finding.SETTLEMENT: "payout differs",
    Finding.MARKERS: "markers differ",
    Finding.ALERT: "5th-point alert differs",
    Finding.EVENTS: "decision differs",
    Finding.UNREADABLE: "unreadable record",
    Finding.UNCHECKED: "record not checked",
    Finding.RULES: "rules changed",
    Finding.UNAPPROVED: "rules not approved",
    Finding.RESUME: "resume not proven",
}


def finding_words(what: str) -> str:
    """The words for a stored ``detail.what`` (the text itself when it is none of ours)."""
    try:
        return Finding(what).words
    except ValueError:
        return what
