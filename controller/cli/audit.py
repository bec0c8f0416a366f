"""Audit commands: ``journal verify``, ``history``, ``export`` and ``clear-halt`` (``docs/cli.md``).

``verify`` and ``export`` read the journal directly, read-only
(``file:...?mode=ro``), so they never block a running service. ``history`` and
``clear-halt`` ask the running service through its control socket and read or
write the journal directly only when no service answers (the offline path).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from typing import Any, TextIO

from controller.cli import journal_init, progress
from controller.cli import options as paths
from controller.cli.dealer import call
from controller.cli.display import hand_line
from controller.control.ops import Op
from controller.core.config import FireBetRules
from controller.core.errors import (
    FirebetError,
    JournalIntegrityError,
    ServiceUnreachable,
    UsageError,
)
from controller.journal import Journal, clear_halt, describe_clear, parse_time, recover, verify
from controller.journal.history import history
from controller.journal.parallel import workers

EXPORT_FIELDS = ("record", "at", "actor", "kind", "payload", "snapshot", "prev_hash", "hash")


def _open(args: argparse.Namespace, *, read_only: bool = True) -> tuple[Journal, FireBetRules]:
    """The journal of the table ``args`` names (exit 1 when there is none) and its rules."""
    where = paths.locate(args)
    journal = Journal.open(where.state_dir, where.config, read_only=read_only)
    if read_only and not journal.path.exists() and not journal.files.traces():
        raise FirebetError(
            f"there is no journal at {journal.path.absolute()} (the state directory is "
            f"{where.state_from}; --state-dir D names another)"
        )
    return journal, where.config.firebet


def run_verify(args: argparse.Namespace) -> int:
    """Full check from genesis (files, key, seals, snapshots, head); exit 4 naming the
    first problem, 1 when this user may not read the key (the message says who may)."""
    journal, rules = _open(args)
    shown = progress.wanted()
    with journal, progress.Progress("verify", "records", enabled=shown) as bar:
        recover(journal, rules)
        report = verify(journal, rules, processes=workers(), progress=bar.update)
    if not report.ok:
        record, reason = report.problems[0]
        raise JournalIntegrityError(record, reason)
    print(report.summary())
    return 0


def _print_history(lines: list[dict[str, Any]], out: TextIO) -> None:
    for h in lines:
        hand = hand_line(
            h["hand"], h["unique_points"], h["points"], h["result"], h.get("odds_to_one", 0)
        )
        print(hand, file=out)
        rolls = " ".join(f"{a}-{b}" for a, b in h["rolls"]) or "none"
        print(f"    rolls: {rolls}", file=out)
        for pos, won in h["payouts"].items():
            print(f"    position {pos}: {'wins $' + str(won) if won else 'loses'}", file=out)
        for a in h["actions"]:
            detail = " ".join(
                f"{k}={v}" for k, v in a.items() if k not in ("action", "actor", "at", "record")
            )
            print(f"    {a['at']}  {a['actor']:<12} {a['action']} {detail}".rstrip(), file=out)


def _service(args: argparse.Namespace, op: str, **fields: Any) -> dict[str, Any] | None:
    """Ask the running service; None when no service answers on the socket."""
    try:
        return call(args, op, **fields)
    except ServiceUnreachable:
        return None


def run_history(args: argparse.Namespace) -> int:
    """The last hands, oldest first, one JSON object a line with --json."""
    config = paths.load(args)
    hands = args.hands if args.hands is not None else config.history_hands
    if hands < 1:
        raise UsageError(f"--hands must be at least 1, not {hands}")
    reply = _service(args, Op.HISTORY, hands=hands)
    if reply is not None:
        if not reply.get("ok"):
            raise FirebetError(str(reply.get("error")))
        lines: list[dict[str, Any]] = reply["hands"]
    else:
        journal, rules = _open(args)
        with journal:
            recovered = recover(journal, rules)
            if recovered.halted is not None:
                print(
                    f"firebet: warning: journal halted: {recovered.halted.describe()}",
                    file=sys.stderr,
                )
                if recovered.halted.record is None:
                    raise JournalIntegrityError(None, recovered.halted.reason)
            with journal.view() as db:
                lines = history(db, rules, hands)
    if args.json:
        for line in lines:
            print(json.dumps(line))
    else:
        _print_history(lines, sys.stdout)
    return 0


def run_export(args: argparse.Namespace) -> int:
    """Every record with the fields an auditor needs to re-verify the chain."""
    if args.since:
        try:
            parse_time(args.since)
        except ValueError as exc:
            raise UsageError(f"--since {args.since!r} is not an ISO 8601 time") from exc
    journal, _rules = _open(args)
    out = sys.stdout
    try:
        journal.key_file.read_bytes()
    except OSError as exc:
        why = "not readable by this user" if isinstance(exc, PermissionError) else "missing"
        print(
            f"firebet: note: the journal key {journal.key_file} is {why}: the export is "
            "complete, but its hashes (HMAC-SHA256) can be checked only with the key "
            "(firebet journal verify as the service's user or root)",
            file=sys.stderr,
        )
    shown = progress.wanted(output_shown=progress.stdout_is_terminal())
    with journal, progress.Progress("export", "records", enabled=shown) as bar:
        journal.attach()  # raw rows, no key, no recovery: a damaged journal exports too
        last = journal.last() if shown else None
        total = last.record if last is not None else None
        if args.format == "csv":
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(EXPORT_FIELDS)
        for done, r in enumerate(journal.records(args.since), 1):
            if args.format == "csv":
                snap = r.snapshot or ""
                writer.writerow(
                    (r.record, r.at, r.actor, r.kind, r.payload, snap, r.prev_hash, r.hash)
                )
            else:
                print(json.dumps(r.to_dict(), sort_keys=True), file=out)
            if shown and done % 1024 == 0:
                bar.update(r.record, total)
    return 0


def run_clear_halt(args: argparse.Namespace) -> int:
    """Lift ``halted`` through the running service, or offline when none runs; journaled."""
    reply = _service(args, Op.CLEAR_HALT, note=args.note or "")
    if reply is not None:
        if not reply.get("ok"):
            raise FirebetError(str(reply.get("error")))
        print(f"halt cleared through the service; was: {reply.get('cleared')}")
        print(f"    {reply.get('resumed')}")
        return 0
    if args.actor is not None:
        raise UsageError(
            f"--actor is not taken: the journal records who you are as the OS says "
            f"({paths.os_actor()}); put free text in --note"
        )
    where = paths.locate(args)
    config = where.config
    journal = Journal.open(where.state_dir, config)
    actor = paths.os_actor()
    with journal:
        recovered = recover(journal, config.firebet)
        if recovered.halted is None:
            print(f"the journal {journal.path} is not halted: nothing to clear")
            return 0
        done = clear_halt(journal, config.firebet, actor, note=args.note or "")
        assert done is not None
        record = done[1]
        print(
            f"halt cleared by {actor} (record {record.record}); was: {recovered.halted.describe()}"
        )
        print(f"    {describe_clear(record.data())}")
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    paths.add_location_options(p)


def register(subparsers: Any) -> None:
    """Add ``journal verify|init|migrate``, ``history``, ``export`` and ``clear-halt``."""
    journal = subparsers.add_parser("journal", help="journal tools (verify, init, migrate)")
    tools = journal.add_subparsers(dest="journal_command", metavar="TOOL", required=True)
    verify = tools.add_parser("verify", help="check the whole hash chain from genesis")
    _common(verify)
    verify.set_defaults(func=run_verify)
    journal_init.register(tools, _common)

    history = subparsers.add_parser("history", help="last hands: rolls, points, settlement")
    history.add_argument("--hands", type=paths.whole, metavar="N", help="hands to show")
    history.add_argument("--json", action="store_true", help="one JSON object a line per hand")
    _common(history)
    history.set_defaults(func=run_history)

    export = subparsers.add_parser("export", help="every journal record, for auditors")
    export.add_argument(
        "--format",
        choices=("csv", "jsonl"),
        required=True,
        help="csv: one row a record; jsonl: one JSON object a line",
    )
    export.add_argument("--since", metavar="T", help="only records at or after T (ISO 8601)")
    _common(export)
    export.set_defaults(func=run_export)

    clear = subparsers.add_parser(
        "clear-halt", help="technician: lift halted after the cause is fixed (journaled)"
    )
    clear.add_argument("--actor", help=argparse.SUPPRESS)  # refused: the OS says who
    clear.add_argument("--note", help="what was done about the cause (free text, journaled)")
    _common(clear)
    clear.set_defaults(func=run_clear_halt)
