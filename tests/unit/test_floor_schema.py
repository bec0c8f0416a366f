"""The floor's store is one schema in two dialects (#34): SQLite's ``SCHEMA`` and
PostgreSQL's must name the same tables, columns and indexes, so neither engine can drift
from the other; and what the store packs (:mod:`controller.floor.packing`) comes back
exactly, from a floor.db written before packing too."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from controller.floor import pgstore, store
from controller.floor.packing import pack_digest, pack_text, unpack_digest, unpack_text
from controller.floor.store import SqliteStore

_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+) \((.*)\)[^)]*$", re.S)
_INDEX = re.compile(r"CREATE (?:UNIQUE )?INDEX IF NOT EXISTS (\w+) ON (\w+) \(([^)]*)\)")
_NOT_COLUMNS = {"PRIMARY", "UNIQUE", "CONSTRAINT", "FOREIGN", "CHECK"}


def shape(ddl: str) -> tuple[dict[str, list[str]], dict[str, tuple[str, str]]]:
    """Each table's columns, and each index's table and key, as ``ddl`` makes them."""
    tables: dict[str, list[str]] = {}
    indexes: dict[str, tuple[str, str]] = {}
    for statement in ddl.split(";"):
        statement = statement.strip()
        if table := _TABLE.fullmatch(statement):
            parts = re.split(r",\s*(?![^()]*\))", table[2].strip())  # not inside (...)
            tables[table[1]] = [c.split()[0] for c in parts if c.split()[0] not in _NOT_COLUMNS]
        elif index := _INDEX.match(statement):
            indexes[index[1]] = (index[2], re.sub(r"\s+", " ", index[3]))
        else:
            assert not statement, f"a statement the test does not read: {statement}"
    return tables, indexes


def columns(tables: dict[str, list[str]]) -> dict[str, list[str]]:
    return {name: sorted(names) for name, names in tables.items()}


def test_sqlite_and_postgresql_make_the_same_tables_columns_and_indexes(tmp_path: Path) -> None:
    lite_tables, lite_indexes = shape(store.SCHEMA + store.ALERT_KEYS)
    pg_tables, pg_indexes = shape(pgstore.SCHEMA + store.ALERT_KEYS)
    pg_tables.pop("schema_version")  # PostgreSQL's migrations' own (SQLite: PRAGMA)
    assert columns(lite_tables) == columns(pg_tables)  # (PostgreSQL puts fixed widths first)
    assert lite_indexes == pg_indexes
    assert set(lite_tables) == {"records", "tables", "hands", "settled", "alerts"}
    # the parse is the schema SQLite really makes (a floor.db moved on by ADD COLUMN too)
    db = SqliteStore(tmp_path / "floor.db")
    made = {
        name: [row[1] for row in db._db.execute(f"PRAGMA table_info({name})")]
        for name in lite_tables
    }
    assert made == lite_tables
    db.close()


def test_what_is_packed_comes_back_exactly_and_an_older_text_is_read_as_it_is(
    tmp_path: Path,
) -> None:
    text = '[{"event":"roll","d1":6,"d2":4,"total":10,"outcome":"point_made","at":"é"}]'
    packed = pack_text(text)
    assert unpack_text(packed) == text and len(packed) < len(text) / 2
    digest = "0f" * 32
    assert unpack_digest(pack_digest(digest)) == digest and len(pack_digest(digest)) == 32
    # a floor.db from before packing: its rows are text, read as they are
    path = tmp_path / "floor.db"
    SqliteStore(path).close()
    con = sqlite3.connect(path)
    con.execute(
        "INSERT INTO records VALUES ('CR-07', 1, '2026-01-01T00:00:00.000+00:00', 'command', "
        "'dealer', '{\"command\":\"bet\"}', ?, '2026-01-01T00:00:00.000+00:00', '[]', NULL)",
        (digest,),
    )
    con.execute("INSERT INTO hands VALUES ('CR-07', 1, '{\"hand\":1}')")
    con.commit()
    con.close()
    old = SqliteStore(path)
    (rec,) = old.records("CR-07", 1, 1)
    assert (rec.payload, rec.chain, rec.events) == ({"command": "bet"}, digest, [])
    assert old.hand("CR-07", 1) == {"hand": 1}
    old.close()
