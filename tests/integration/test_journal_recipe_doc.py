"""docs/journal.md's recipe is enough (issue 23): a consumer's MAC check written from the
page's steps alone (hashlib, hmac and json; nothing of firebet) passes on every record of a
real journal made by ``firebet sim`` (two service starts, snapshots every 4 records),
exported with ``firebet export --format jsonl`` (the page's export: the CSV carries no
sealed payload, contract 2); one changed byte fails it."""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
from pathlib import Path

from tests.support import ROOT, run_firebet

DOC = ROOT / "docs" / "journal.md"

# the page's words this check follows, step by step: if the page changes, so must this
STEPS = (
    "The key is the 32 bytes those digits decode to\n   (`bytes.fromhex(text.strip())`)",
    "`hash` is the record's chain MAC `mac(n)` in lowercase hex",
    "`prev_hash` is `mac(n-1)` in hex (64 zeros for record 1)",
    "`snapshot` is\n   the hex SHA-256 of the snapshot's state text, or null",
    '(`json.dumps(payload, sort_keys=True, separators=(",",\n   ":"), ensure_ascii=True)`)',
    "`message` = the raw 32 bytes of `prev_hash`, then the UTF-8 text\n"
    '   `"<record>\\n<at>\\n<actor>\\n<kind>\\n<snap>\\n"`',
    'the text `"\\nsnapshot "` followed by\n   the raw 32 bytes of `snapshot`',
    "HMAC-SHA256(key, `message`) is the raw 32\n   bytes of `hash`",
)


def sealed(key: bytes, row: dict[str, object], body: str) -> bool:
    """Step 4 and 5 of the page, for one exported record whose body text is ``body``."""
    snapshot = row["snapshot"] or None
    head = f"{row['record']}\n{row['at']}\n{row['actor']}\n{row['kind']}\n{1 if snapshot else 0}\n"
    message = bytes.fromhex(str(row["prev_hash"])) + head.encode("utf-8") + body.encode("utf-8")
    if snapshot:
        message += b"\nsnapshot " + bytes.fromhex(str(snapshot))
    return hmac.compare_digest(
        hmac.new(key, message, hashlib.sha256).digest(), bytes.fromhex(str(row["hash"]))
    )


def check(key: bytes, rows: list[dict[str, object]], bodies: list[str]) -> list[int]:
    """The records that fail, in order: a seal that does not check, or a broken link."""
    failed, prev = [], "0" * 64
    for row, body in zip(rows, bodies, strict=True):
        if row["prev_hash"] != prev or not sealed(key, row, body):
            failed.append(int(str(row["record"])))
        prev = str(row["hash"])
    return failed


def test_a_check_written_from_the_page_passes_on_every_record(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    for words in STEPS:
        assert words in text, f"docs/journal.md no longer says: {words!r}"
    config = tmp_path / "table.toml"
    config.write_text("[journal]\nsnapshot_every = 4\n")
    state = tmp_path / "var"
    where = ("--config", str(config), "--state-dir", str(state))
    for seed in ("1", "2"):  # two starts: start and rules records between the rolls
        sim = run_firebet("sim", "--rolls", "12", "--seed", seed, "--plain", *where)
        assert sim.returncode == 0, sim.stderr
    assert run_firebet("journal", "verify", *where).returncode == 0

    key = bytes.fromhex((state / "journal.key").read_text(encoding="ascii").strip())  # step 1
    assert len(key) == 32
    jsonl = run_firebet("export", "--format", "jsonl", *where)
    assert jsonl.returncode == 0, jsonl.stderr
    rows = [json.loads(line) for line in jsonl.stdout.splitlines()]
    bodies = [  # step 3
        json.dumps(r["payload"], sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        for r in rows
    ]
    kinds = {r["kind"] for r in rows}
    assert {"start", "rules", "command"} <= kinds
    assert sum(1 for r in rows if r["snapshot"]) >= 5  # snapshot records among them
    assert check(key, rows, bodies) == []

    # the page sends the check to the JSONL: the CSV is a spreadsheet's view, no payload,
    # its rows matched to the checked lines by record and hash
    assert "The check reads this JSONL export only" in text
    table = run_firebet("export", "--format", "csv", *where)
    assert table.returncode == 0, table.stderr
    csv_rows = list(csv.DictReader(io.StringIO(table.stdout)))
    assert "payload" not in csv_rows[0]
    assert [(int(r["record"]), r["hash"]) for r in csv_rows] == [
        (r["record"], r["hash"]) for r in rows
    ]

    # the check can fail: one changed byte of a body, another key, a broken link
    snap = next(i for i, r in enumerate(rows) if r["snapshot"])
    changed = list(bodies)
    changed[snap] = changed[snap].replace(":", ": ", 1)
    assert check(key, rows, changed) == [rows[snap]["record"]]
    assert check(bytes(32), rows, bodies) == [r["record"] for r in rows]
    assert check(key.hex().encode()[:32], rows, bodies) != []  # the hex text is not the key
    assert check(key, rows[:3] + rows[4:], bodies[:3] + bodies[4:]) == [rows[4]["record"]]
