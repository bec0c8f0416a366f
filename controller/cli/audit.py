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
from controller.cli.dealer import call, refusal, refusal_json
from controller.cli.wording import count, hand_line, money, paid_line
from controller.control.ops import Op
from controller.core.cells import spreadsheet_cell
from controller.core.config import FireBetRules
from controller.core.errors import (
    FirebetError,
    JournalIntegrityError,
    Refusal,
    RequestRefused,
    ServiceUnreachable,
    UsageError,
)
from controller.journal import (
    Halt,
    Journal,
    JournalKeyUnreadable,
    clear_halt,
    describe_clear,
    parse_time,
    preview_clear_halt,
    recover,
    verify,
)
from controller.journal.handlog import history_line
from controller.journal.history import MAX_HANDS, history
from controller.journal.parallel import workers
from controller.journal.proof import Break

CSV_FIELDS = ("record", "at", "actor", "kind", "snapshot", "prev_hash", "hash")
"""The CSV's first columns (contract 2, issue 33): what matches a row to its JSONL line
and to the chain. The sealed ``payload`` is the JSONL's alone (the chain check reads the
JSONL: docs/journal.md); ``snapshot`` is its digest in hex, empty for none."""
PLAIN_FIELDS = ("what", "d1", "d2", "position", "amount", "hand", "detail")
"""The CSV's plain columns after them: what the record's ``payload`` says, a cell each
and ``key=value`` texts, so a spreadsheet has no JSON in any cell."""


def _flat(key: str, value: Any) -> list[str]:
    """``key=value`` texts of one payload entry, a nested object's keys dotted (an empty
    one: ``key=``)."""
    if isinstance(value, dict) and value:
        return [x for k, v in value.items() for x in _flat(f"{key}.{k}", v)]
    if isinstance(value, list):
        return [f"{key}={','.join(_flat_value(v) for v in value)}"]
    return [f"{key}={_flat_value(value)}"]


def _flat_value(value: Any) -> str:
    """One scalar as text (an object or list inside a list: its ``key=value`` texts)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dict):
        return " ".join(x for k, v in value.items() for x in _flat(str(k), v))
    if isinstance(value, list):
        return " ".join(_flat_value(v) for v in value)
    return str(value)


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def plain_columns(kind: str, body: str) -> list[str]:
    """The :data:`PLAIN_FIELDS` of one record: ``what`` (the command, or the record's kind),
    the dice, position, amount and hand when it names them, and every other entry of its
    payload as ``key=value`` text (``; `` between them, a nested key dotted). A body that
    is not JSON (a damaged record) is ``unreadable=`` its text."""
    try:
        payload = json.loads(body)
    except ValueError:
        return [kind, "", "", "", "", "", f"unreadable={body}"]
    if not isinstance(payload, dict):
        return [kind, "", "", "", "", "", f"payload={_flat_value(payload)}"]
    rest = dict(payload)
    what = rest.pop("command") if kind == "command" and _scalar(rest.get("command")) else kind
    # a column takes a name's value only when it is one number or word; else it is detail
    cells = [
        _flat_value(rest.pop(name)) if _scalar(rest.get(name)) else ""
        for name in PLAIN_FIELDS[1:-1]
    ]
    if rest.get("at") == "":
        rest.pop("at")  # the command carried no time of its own: the record's is `at`
    detail = "; ".join(x for k, v in rest.items() for x in _flat(k, v))
    return [str(what), *cells, detail]


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
        damage = JournalIntegrityError(record, reason)
        if args.json:  # the first problem's record and words beside the code
            print(json.dumps({**refusal_json(damage), "record": record, "reason": reason}))
            print(f"firebet: {damage}", file=sys.stderr)
            return damage.exit_code
        raise damage
    if args.json:
        print(
            json.dumps(
                {
                    "ok": True,
                    "records": report.records,
                    "snapshots": report.snapshots,
                    "chain_head": report.last_hash,
                    "set_aside": len(report.acknowledged),
                    "halted": report.halted.describe() if report.halted is not None else None,
                    "summary": report.summary(),
                }
            )
        )
        return 0
    print(report.summary())
    return 0


def _value(v: Any) -> str:
    if isinstance(v, list):
        return " ".join(map(str, v))
    if isinstance(v, dict):
        return ", ".join(f"{k} {_value(x)}" for k, x in v.items()) or "none"
    return str(v)


def _roll_lines(h: dict[str, Any]) -> list[str]:
    """Each roll with its time and where it came from: the reader (seq), a dealer's hand
    (manual), a held reader roll the dealer applied."""
    applied = {a["record"]: a for a in h["actions"] if a["action"] == "held_apply"}
    out = []
    for r in h.get("roll_log", []):
        d1, d2 = r["dice"]
        held = applied.get(r["record"])
        if held is not None:
            mark = (
                f"held roll {held['number']} (reader seq {held['seq']}), applied by {held['actor']}"
            )
        elif r["source"] == "manual":
            mark = "MANUAL: keyed by a dealer"
        else:
            mark = f"reader seq {r['seq']}" if r.get("seq") is not None else str(r["source"])
        if r.get("verified", True) is False:
            mark += f"  UNVERIFIED (record {r['record']})"
        out.append(f"      {r['at']}  {d1}-{d2}  {mark}")
    return out


def _figures(h: dict[str, Any]) -> str:
    """A hand's figures in one line: points, verdict, and each wager won or lost."""
    hand = hand_line(
        h["hand"], h["unique_points"], h["points"], h["result"], h.get("odds_to_one") or 0
    )
    return hand + (f" - {paid_line(h)}" if h["result"] is not None else "")


def _riding(wagers: dict[str, int]) -> str:
    return ", ".join(f"#{p} {money(a)}" for p, a in wagers.items()) or "none"


def unverified_lines(h: dict[str, Any]) -> list[str]:
    """A hand that rests on records past a halted journal's break, never as fact: the
    mark, what those records say (marked), and the last verified figures beside them."""
    at = h.get("break")
    where = f"the break at record {at}" if at is not None else "the break (no record proven)"
    lines = [
        f"hand {h['hand']}: UNVERIFIED - it rests on records past {where}, "
        "which the chain does not prove"
    ]
    said = _figures(h).split(": ", 1)[1]
    riding = f"; wagers {_riding(h['wagers'])}" if "wagers" in h else ""
    lines.append(f"    unproven, as those records say: {said}{riding}")
    before = h.get("last_verified")
    if before is None:
        lines.append("    last verified: nothing (the hand had not begun before the break)")
    else:
        shown = _figures({"hand": h["hand"], **before}).split(": ", 1)[1]
        lines.append(
            f"    last verified (record {before['record']}): {shown}; "
            f"wagers {_riding(before['wagers'])}"
        )
    return lines


def _print_history(lines: list[dict[str, Any]], out: TextIO) -> None:
    for h in lines:
        if h.get("verified", True):
            print(_figures(h), file=out)
        else:
            for line in unverified_lines(h):
                print(line, file=out)
        rolls = _roll_lines(h)
        if rolls:
            print(f"    {count(len(rolls), 'roll')}:", file=out)
            for line in rolls:
                print(line, file=out)
        else:
            dice = " ".join(f"{a}-{b}" for a, b in h["rolls"]) or "none"
            print(f"    rolls: {dice}", file=out)
        for a in h["actions"]:
            detail = " ".join(
                f"{k}={_value(v)}"
                for k, v in a.items()
                if k not in ("action", "actor", "at", "record", "verified") and v not in (None, "")
            )
            unproven = f"  UNVERIFIED (record {a['record']})" if a.get("verified") is False else ""
            text = f"    {a['at']}  {a['actor']:<12} {a['action']} {detail}".rstrip()
            print(text + unproven, file=out)


def shown_hands(lines: list[dict[str, Any]], hands: int) -> tuple[list[dict[str, Any]], str]:
    """The text of ``history --hands N``: the last N hands that have something to show,
    and a note for the hand in play when it has nothing yet (a new shooter, no roll, no
    action), which is then not counted: right after a seven-out, ``--hands 1`` shows the
    hand just settled. ``--json`` keeps every hand, the one in play last."""
    last = lines[-1] if lines else None
    if last is not None and last["result"] is None and not last["rolls"] and not last["actions"]:
        return lines[:-1][-hands:], f"hand {last['hand']}: in play, no roll or action yet"
    return lines[-hands:], ""


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
    if not 1 <= hands <= MAX_HANDS:
        raise UsageError(f"--hands must be from 1 to {MAX_HANDS:,}, not {hands}")
    # the text leaves an empty hand in play uncounted: one hand more is asked for
    asked = hands if args.json else min(hands + 1, MAX_HANDS)
    detail = 0 if args.json else 1
    reply = _service(args, Op.HISTORY, hands=asked, detail=detail)
    halted: tuple[int | None, str] | None = None
    if reply is not None:
        if not reply.get("ok"):
            raise refusal(reply)
        lines: list[dict[str, Any]] = reply["hands"]
        if isinstance(reply.get("halted"), dict):
            halted = (reply["halted"].get("record"), str(reply["halted"].get("reason")))
    else:
        journal, rules = _open(args)
        with journal:
            recovered = recover(journal, rules)
            if recovered.halted is not None:
                if recovered.halted.record is None:
                    raise JournalIntegrityError(None, recovered.halted.reason)
                halted = (recovered.halted.record, recovered.halted.describe())
            at = Break(halted[0]) if halted is not None else None
            with journal.view() as db:
                lines = history(db, rules, asked, detail=bool(detail), halted_at=at)
    if args.json:
        for line in lines:
            print(json.dumps(history_line(line)))
    else:
        shown, note = shown_hands(lines, hands)
        _print_history(shown, sys.stdout)
        if note:
            print(note)
    if halted is not None:  # shown, marked; a script must not take it for a clean recall
        record, reason = halted
        where = f"record {record}" if record is not None else "the files"
        print(
            f"firebet: journal halted: {reason}; what rests on {where} and after is "
            "UNVERIFIED (marked), the last verified figures beside it",
            file=sys.stderr,
        )
        return JournalIntegrityError.exit_code
    return 0


def run_export(args: argparse.Namespace) -> int:
    """Every record: as JSON lines, with the fields an auditor needs to re-verify the chain;
    as CSV, the spreadsheet's view (plain columns, no JSON: :data:`CSV_FIELDS`)."""
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
        halted = _halt_of(journal, _rules)
        at = Break(halted.record) if halted is not None else None
        if halted is not None:
            print(
                f"firebet: journal halted: {halted.describe()}; every record from "
                f"{at.first if at is not None else 1} on is marked unverified "
                "(the chain does not prove it)",
                file=sys.stderr,
            )
        journal.attach()  # raw rows: a damaged journal exports too
        last = journal.last() if shown else None
        total = last.record if last is not None else None
        if args.format == "csv":
            writer = csv.writer(out, lineterminator="\n")
            verified = ("verified",) if at is not None else ()
            writer.writerow(CSV_FIELDS + verified + PLAIN_FIELDS)
        done, first, final = 0, None, None
        for done, (r, rules) in enumerate(journal.records_decided(args.since), 1):
            first = r.record if first is None else first
            final = r.record
            if args.format == "csv":  # its columns are a contract (docs/cli.md, contract 2)
                snap = r.snapshot or ""
                row = [r.record, r.at, r.actor, r.kind, snap, r.prev_hash, r.hash]
                if at is not None:  # halted: one column more, the record proven or not
                    row.append("yes" if at.proves(r.record) else "no")
                # a tampered record's text is never a formula in the auditor's spreadsheet
                cells = row + plain_columns(r.kind, r.payload)
                writer.writerow([spreadsheet_cell(str(c)) for c in cells])
            else:
                # decided_under: the rules record this record means what it means under
                line = {**r.to_dict(), "decided_under": rules}
                if at is not None:
                    line |= {"verified": at.proves(r.record), "break": at.record}
                print(json.dumps(line, sort_keys=True), file=out)
            if shown and done % 1024 == 0:
                bar.update(r.record, total)
    out.flush()  # the data first (a reader gone, `| head`: the count is not said either)
    span = f" (records {first:,} to {final:,})" if first is not None else ""
    since = f" since {args.since}" if args.since else ""
    print(f"firebet: exported {count(done, 'record')}{since}{span}", file=sys.stderr)
    return 0


def _halt_of(journal: Journal, rules: FireBetRules) -> Halt | None:
    """The halt in force, as recovery finds it (with the key: the break is where the chain
    stops checking); without the key, the halt the files record."""
    try:
        return recover(journal, rules).halted
    except JournalKeyUnreadable:
        journal.attach()
        return journal.recorded_halt()


def describe_aside(preview: dict[str, Any] | None) -> list[str]:
    """What a clear-halt would set aside, in a technician's words: the records, and the
    hands, fire bets and payouts they hold (which come off history and the meters)."""
    if preview is None:
        return ["    nothing is set aside: the journal's files are intact in this view"]
    lines = [f"    {describe_clear(preview)}"]
    records = (preview.get("set_aside") or {}).get("records")
    if not records:
        return lines
    for h in preview["hands"]:
        shown = unverified_lines({"break": preview.get("break"), **h})
        rolls = count(len(h["rolls"]), "roll")
        lines += [f"    {shown[0]} ({rolls} set aside)", *(f"    {x}" for x in shown[1:])]
    lines.append(
        f"    unproven, as the records set aside say: fire bets taken "
        f"{money(preview['wagered'])}, payouts {money(preview['paid'])}; whatever they say "
        "comes off history and the meters (surveillance compares the floor's copy, "
        "which the floor proves with the chain)"
    )
    if preview.get("unreadable"):
        lines.append(f"    ({count(preview['unreadable'], 'record')} set aside cannot be read)")
    return lines


def _confirmed(args: argparse.Namespace) -> bool:
    """``--yes``, or the technician types ``yes`` (asked on standard error under ``--json``,
    whose standard output is the one JSON object)."""
    if args.yes:
        return True
    shown = sys.stderr if args.json else sys.stdout
    print("Clear the halt and set this aside? Type yes to go on: ", end="", flush=True, file=shown)
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        answer = ""
    return answer.strip().lower() == "yes"


def _not_confirmed(args: argparse.Namespace, what: str) -> int:
    """Not confirmed: nothing changed, exit 1 (under ``--json`` the ``not_confirmed`` refusal)."""
    words = f"not confirmed: the {what} stays halted, nothing was changed"
    if args.json:
        raise RequestRefused(words, Refusal.NOT_CONFIRMED)
    print(words)
    return 1


def cleared_json(
    through: str, cleared: str, resumed: str, preview: dict[str, Any] | None
) -> dict[str, Any]:
    """``clear-halt --json``'s object when the halt is lifted (controller/schemas/
    cli-clear-halt.schema.json): through the service or offline, what the halt was, where
    the game resumed, and the preview it showed and was confirmed (``None``: the files
    were intact, nothing was set aside)."""
    return {
        "ok": True,
        "through": through,
        "cleared": cleared,
        "resumed": resumed,
        "preview": preview,
    }


def run_clear_halt(args: argparse.Namespace) -> int:
    """Lift ``halted`` through the running service, or offline when none runs; journaled.
    Shows first what it will set aside and asks (``--yes`` for scripts); needs ``--note``.
    Under ``--json`` the words go to standard error and standard output is one object."""
    if args.actor is not None:
        raise UsageError(
            f"--actor is not taken: the journal records who you are as the OS says "
            f"({paths.os_actor()}); put free text in --note"
        )
    note = (args.note or "").strip()
    if not note:
        raise UsageError(
            'clear-halt needs --note "what was done about the cause" (journaled with who '
            "you are, for surveillance and the games manager)"
        )
    out = sys.stderr if args.json else sys.stdout
    preview = _service(args, Op.CLEAR_HALT, preview=1)
    if preview is not None:
        if not preview.get("ok"):
            raise refusal(preview)  # not halted: 1, as offline
        print(f"the table is halted: {preview.get('cleared')}", file=out)
        print("firebet clear-halt would (through the service):", file=out)
        print("\n".join(describe_aside(preview.get("preview"))), file=out)
        if not _confirmed(args):
            return _not_confirmed(args, "table")
        reply = _service(args, Op.CLEAR_HALT, note=note)
        if reply is None:
            raise ServiceUnreachable("the service stopped before the clear-halt: ask again")
        if not reply.get("ok"):
            raise refusal(reply)
        print(f"halt cleared through the service; was: {reply.get('cleared')}", file=out)
        print(f"    {reply.get('resumed')}", file=out)
        if args.json:
            done = cleared_json(
                "service", str(reply.get("cleared")), str(reply.get("resumed")),
                preview.get("preview"),
            )  # fmt: skip
            print(json.dumps(done))
        return 0
    where = paths.locate(args)
    config, state = where.config, where.state_dir
    with Journal.open(state, config, read_only=True) as view:
        recover(view, config.firebet)
        aside = preview_clear_halt(view, config.firebet)
        if aside is None:
            raise RequestRefused(
                f"the journal {view.path} is not halted: nothing to clear", Refusal.NOT_HALTED
            )
        halted = view.halted
        print(f"the journal is halted: {halted.describe() if halted else '?'}", file=out)
    print("firebet clear-halt would (offline, no service running):", file=out)
    print("\n".join(describe_aside(aside.to_dict())), file=out)
    if not _confirmed(args):
        return _not_confirmed(args, "journal")
    journal = Journal.open(state, config)
    actor = paths.os_actor()
    with journal:
        recovered = recover(journal, config.firebet)
        if recovered.halted is None:
            raise RequestRefused(
                f"the journal {journal.path} is not halted: nothing to clear", Refusal.NOT_HALTED
            )
        lifted = clear_halt(journal, config.firebet, actor, note=note)
        assert lifted is not None
        record = lifted[1]
        was = recovered.halted.describe()
        resumed = describe_clear(record.data())
        print(f"halt cleared by {actor} (record {record.record}); was: {was}", file=out)
        print(f"    {resumed}", file=out)
    if args.json:
        print(json.dumps(cleared_json("offline", was, resumed, aside.to_dict())))
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    paths.add_location_options(p)


def register(subparsers: Any) -> None:
    """Add ``journal verify|init|migrate``, ``history``, ``export`` and ``clear-halt``."""
    journal = subparsers.add_parser("journal", help="journal tools (verify, init, migrate)")
    tools = journal.add_subparsers(dest="journal_command", metavar="TOOL", required=True)
    verify = tools.add_parser("verify", help="check the whole hash chain from genesis")
    verify.add_argument(
        "--json",
        action="store_true",
        help="one JSON object: the counts and chain head, or the damage's code and words",
    )
    _common(verify)
    verify.set_defaults(func=run_verify, _json_refusal=True)
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
        help="jsonl: a JSON object a line, the sealed evidence; csv: plain columns, no JSON",
    )
    export.add_argument("--since", metavar="T", help="only records at or after T (ISO 8601)")
    _common(export)
    export.set_defaults(func=run_export)

    clear = subparsers.add_parser(
        "clear-halt", help="technician: lift halted after the cause is fixed (journaled)"
    )
    clear.add_argument("--actor", help=argparse.SUPPRESS)  # refused: the OS says who
    clear.add_argument(
        "--note", help="what was done about the cause (free text, journaled; required)"
    )
    clear.add_argument(
        "--yes",
        action="store_true",
        help="do not ask: clear the halt after showing what is set aside (for scripts)",
    )
    clear.add_argument(
        "--json",
        action="store_true",
        help="one JSON object: what was cleared and set aside, or a refusal's code and words "
        "(the words on standard error)",
    )
    _common(clear)
    clear.set_defaults(func=run_clear_halt, _json_refusal=True)
