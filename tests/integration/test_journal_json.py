"""``journal init`` and ``journal migrate`` take ``--json`` (issue 33): one object when
done, the refusal object when not, each valid by its shipped schema (``run_firebet``
checks every line against ``controller/schemas/``)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import run_firebet


def test_journal_init_json_says_where_the_old_files_went(tmp_path: Path) -> None:
    made = run_firebet("sim", "--rolls", "3", "--seed", "1", "--state-dir", str(tmp_path))
    assert made.returncode == 0, made.stderr
    init = ("journal", "init", "--json", "--reason", "disk replaced", "--state-dir", str(tmp_path))
    healthy = run_firebet(*init)  # a healthy journal is never replaced: the refusal object
    assert healthy.returncode == 1 and json.loads(healthy.stdout)["ok"] is False
    (tmp_path / "journal.db").rename(tmp_path / "journal.db.damaged")  # as a lost disk
    done = run_firebet(*init)
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["ok"] is True and body["journal"] == str(tmp_path / "journal.db")
    assert isinstance(body["moved"], list) and body["actor"]


def test_journal_migrate_json_refuses_a_keyed_journal_with_the_refusal_object(
    tmp_path: Path,
) -> None:
    made = run_firebet("sim", "--rolls", "3", "--seed", "1", "--state-dir", str(tmp_path))
    assert made.returncode == 0, made.stderr
    refused = run_firebet("journal", "migrate", "--json", "--state-dir", str(tmp_path))
    assert refused.returncode != 0
    body = json.loads(refused.stdout)
    assert body["ok"] is False and body["exit"] == refused.returncode and body["code"]
