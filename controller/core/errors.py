"""One error hierarchy for the whole controller.

Each subclass also inherits the builtin it resembles, so callers that only know
``ValueError`` or ``OSError`` still catch it. Every error carries the exit code
of the command-line contract (``docs/cli.md``).
"""

from __future__ import annotations

from enum import StrEnum


class Refusal(StrEnum):
    """Why a request was not done, as a stable code (``docs/cli.md``, "Refusal codes"):
    ``--json`` gives it beside the words, so a script tells reasons apart without reading
    English. Codes are only ever added; one never changes its meaning."""

    # the table's rules (the engine's Refused events)
    NO_SUCH_POSITION = "no_such_position"
    NOT_AN_AMOUNT = "not_an_amount"
    BETTING_CLOSED = "betting_closed"
    OVER_MAXIMUM = "over_maximum"
    UNDER_MINIMUM = "under_minimum"
    NOT_IN_INCREMENTS = "not_in_increments"
    NO_WAGER = "no_wager"
    NOTHING_TO_VOID = "nothing_to_void"
    NOT_THE_LAST_ROLL = "not_the_last_roll"
    CORRECTION_PENDING = "correction_pending"
    BAD_DICE = "bad_dice"
    READER_CONFLICT = "reader_conflict"
    READER_GAP = "reader_gap"  # protocol 3: a roll numbered past the next one
    READER_SESSION = "reader_session"  # protocol 3: a HELLO of a session already past
    NO_ALERT = "no_alert"
    ALREADY_CONFIRMED = "already_confirmed"
    NO_HELD_ROLL = "no_held_roll"
    BAD_COMMAND = "bad_command"
    # the service's
    READER_WORKING = "reader_working"
    DIAGNOSTICS = "diagnostics"
    HALTED = "halted"
    NOT_HALTED = "not_halted"
    NOT_CONFIRMED = "not_confirmed"
    NOT_ACKED = "not_acked"
    NOT_A_BENCH = "not_a_bench"
    UNKNOWN_OP = "unknown_op"
    EXPIRED = "expired"
    BUSY = "busy"
    NOT_PERMITTED = "not_permitted"
    REQUEST_ID_REUSED = "request_id_reused"
    BAD_INPUT = "bad_input"
    NO_SERVICE = "no_service"
    INTEGRITY = "integrity"
    FAILED = "failed"

    @classmethod
    def of(cls, value: object) -> Refusal:
        """The code ``value`` names; :attr:`FAILED` for anything else (an older reply)."""
        try:
            return cls(str(value))
        except ValueError:
            return cls.FAILED

    @property
    def exit_code(self) -> int:
        """The exit code of a request refused for this reason (``docs/cli.md``)."""
        return _REFUSAL_EXIT.get(self, 1)


_REFUSAL_EXIT = {
    Refusal.NO_SUCH_POSITION: 2,
    Refusal.NOT_AN_AMOUNT: 2,
    Refusal.BAD_DICE: 2,
    Refusal.BAD_COMMAND: 2,
    Refusal.BAD_INPUT: 2,
    Refusal.NO_SERVICE: 3,
    Refusal.HALTED: 4,
    Refusal.INTEGRITY: 4,
}


class FirebetError(Exception):
    """Base of every error firebet raises on purpose."""

    exit_code = 1
    code: Refusal = Refusal.FAILED


class UsageError(FirebetError, ValueError):
    """Bad usage or bad input: a malformed script line, a bad argument (exit 2)."""

    exit_code = 2
    code = Refusal.BAD_INPUT


class RequestRefused(FirebetError):
    """The table or the service refused a request: ``code`` says why as a stable code and
    gives the exit code (1, or 2 for bad input such as a position not on the layout)."""

    def __init__(self, reason: str, code: Refusal | str = Refusal.FAILED) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = Refusal.of(code)
        self.exit_code = self.code.exit_code


class ConfigError(UsageError):
    """A configuration file or key is wrong; the message names the file, key and reason."""

    def __init__(self, source: str, key: str, reason: str) -> None:
        self.source = source
        self.key = key
        self.reason = reason
        where = f"{source}: {key}" if key else source
        super().__init__(f"{where}: {reason}")


class ScriptError(UsageError):
    """A replay script line cannot be read; the message names the file and line."""

    def __init__(self, source: str, line_no: int, line: str, reason: str) -> None:
        self.source = source
        self.line_no = line_no
        self.line = line
        self.reason = reason
        super().__init__(f"{source}:{line_no}: {reason}: {line.strip()!r}")


class ServiceUnreachable(FirebetError, ConnectionError):
    """The firebet service is not running or its control socket cannot be reached (exit 3)."""

    exit_code = 3
    code = Refusal.NO_SERVICE


class JournalIntegrityError(FirebetError, RuntimeError):
    """The journal's hash chain or records are damaged (exit 4)."""

    exit_code = 4
    code = Refusal.INTEGRITY

    def __init__(self, record: int | None, reason: str) -> None:
        self.record = record
        self.reason = reason
        where = f"record {record}: " if record is not None else ""
        super().__init__(f"journal integrity failure: {where}{reason}")


class TableHalted(FirebetError, RuntimeError):
    """A game action refused because the table is halted (journal or program integrity).

    Exit 4, through the control socket as offline: only a technician's action (or a
    reinstall, for the program) lifts the halt.
    """

    exit_code = 4
    code = Refusal.HALTED


class HardwareError(FirebetError, OSError):
    """A pin, port or device is missing or not permitted; the message says the fix."""

    exit_code = 1


class JournalHalted(JournalIntegrityError):
    """A game command was refused because the journal is halted (exit 4)."""

    code = Refusal.HALTED

    def __init__(self, record: int | None, reason: str) -> None:
        super().__init__(record, f"halted, nothing is recorded until clear-halt: {reason}")
        self.halt_record = record
        self.halt_reason = reason

    def describe(self) -> str:
        """Why the journal is halted, in one line."""
        where = f"record {self.halt_record}: " if self.halt_record is not None else ""
        return f"{where}{self.halt_reason}"


class JournalWriteError(FirebetError, OSError):
    """The journal cannot be written (disk full, read-only, I/O error): nothing was recorded."""

    exit_code = 1

    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"cannot write the journal {path}: {reason}")


class JournalKeyUnreadable(FirebetError, PermissionError):
    """The journal's key exists but this user may not read it (exit 1): the message says
    what is needed."""

    exit_code = 1

    def __init__(self, path: object) -> None:
        self.path = str(path)
        super().__init__(
            f"the journal key {path} is not readable by this user: the chain is checked "
            "with it. Run the command as the service's user or root "
            "(sudo firebet journal verify), see docs/runbook.md"
        )
