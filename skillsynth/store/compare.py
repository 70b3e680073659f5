"""Compare the schemas of two memory.db files, naming every difference.

The released GAIA is the reference for what a memory.db must look like; this is how a test
(or a user) checks a file skillsynth made or migrated against one GAIA made. Both files are
opened read-only. The comparison is structural, not textual: SQLite keeps each object's
``CREATE`` text as written, comments and ALTER TABLE appends included, so equal schemas
rarely have equal text. Compared: the schema version; ordinary tables (columns in order,
declared type, NOT NULL, default, primary key, AUTOINCREMENT); FTS tables (their module
arguments); named indexes (table, key columns with order and collation, UNIQUE, partial
WHERE clause); triggers (their normalised text). FTS shadow tables and SQLite's own
``sqlite_*`` objects follow from the rest and are left out.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .memory import MemoryStore

__all__ = ["compare_schema"]

_FTS_SHADOWS = ("_data", "_idx", "_docsize", "_config", "_content")


def _norm(sql: str) -> str:
    """SQL text without comments, IF NOT EXISTS, case or layout differences."""
    sql = re.sub(r"--[^\n]*", " ", sql)
    sql = re.sub(r"\s+", " ", sql).strip().lower()
    sql = sql.replace(" if not exists", "")
    return re.sub(r"\s*([(),;=])\s*", r"\1", sql)


def _facts(path: str | Path) -> dict[str, Any]:
    with MemoryStore.open(path, read_only=True) as s:
        version = s.schema_version()
        rows = s.execute("SELECT type, name, tbl_name, sql FROM sqlite_master "
                         "WHERE name NOT LIKE 'sqlite_%' ORDER BY name")
        virtual = {name for kind, name, _, sql in rows
                   if kind == "table" and sql and sql.upper().startswith("CREATE VIRTUAL")}
        tables: dict[str, Any] = {}
        indexes: dict[str, Any] = {}
        triggers: dict[str, str] = {}
        for kind, name, table, sql in rows:
            if kind == "table" and name in virtual:
                tables[name] = ("fts", _norm(sql))
            elif kind == "table" and not any(name == v + sfx for v in virtual
                                             for sfx in _FTS_SHADOWS):
                cols = [(r[1], r[2].upper(), bool(r[3]), r[4], r[5])
                        for r in s.execute(f"PRAGMA table_xinfo(\"{name}\")")]
                tables[name] = ("table", cols, "autoincrement" in _norm(sql or ""))
            elif kind == "index" and sql:
                keys = [(r[2], bool(r[3]), r[4]) for r in
                        s.execute(f"PRAGMA index_xinfo(\"{name}\")") if r[5]]
                where = re.search(r"\)\s*where\s+(.*)$", _norm(sql))
                indexes[name] = (table, keys, _norm(sql).startswith("create unique"),
                                 where.group(1) if where else None)
            elif kind == "trigger":
                triggers[name] = _norm(sql)
    return {"version": version, "tables": tables, "indexes": indexes, "triggers": triggers}


def _only(kind: str, a: dict[str, Any], b: dict[str, Any], la: str, lb: str) -> list[str]:
    out = [f"{kind} {n}: in {la}, missing from {lb}" for n in sorted(set(a) - set(b))]
    return out + [f"{kind} {n}: in {lb}, missing from {la}" for n in sorted(set(b) - set(a))]


def _table_diffs(name: str, ta: Any, tb: Any, la: str, lb: str) -> list[str]:
    if ta[0] != tb[0]:
        return [f"table {name}: {ta[0]} in {la}, {tb[0]} in {lb}"]
    if ta[0] == "fts":
        return [] if ta == tb else [f"FTS table {name}: {ta[1]!r} in {la}, {tb[1]!r} in {lb}"]
    out: list[str] = []
    ca = {c[0]: c for c in ta[1]}
    cb = {c[0]: c for c in tb[1]}
    out += [f"column {name}.{c}: in {la}, missing from {lb}" for c in ca if c not in cb]
    out += [f"column {name}.{c}: in {lb}, missing from {la}" for c in cb if c not in ca]
    for c in (c for c in ca if c in cb):
        for i, what in ((1, "type"), (2, "not null"), (3, "default"), (4, "primary key")):
            if ca[c][i] != cb[c][i]:
                out.append(f"column {name}.{c}: {what} {ca[c][i]!r} in {la}, "
                           f"{cb[c][i]!r} in {lb}")
    common_a = [c for c in ca if c in cb]
    common_b = [c for c in cb if c in ca]
    if common_a != common_b:
        out.append(f"table {name}: column order {common_a} in {la}, {common_b} in {lb}")
    if ta[2] != tb[2]:
        out.append(f"table {name}: AUTOINCREMENT {ta[2]} in {la}, {tb[2]} in {lb}")
    return out


def compare_schema(a: str | Path, b: str | Path, *,
                   labels: tuple[str, str] | None = None) -> list[str]:
    """Every schema difference between two memory.db files, one line each (empty: equal).

    Args:
        a: one database (opened read-only, not changed).
        b: the other.
        labels: names for ``a`` and ``b`` in the messages (default: their paths).

    Raises:
        StoreError: a file is missing or not SQLite.
        SchemaError: a file is not a GAIA memory database.
    """
    la, lb = labels or (str(a), str(b))
    fa, fb = _facts(a), _facts(b)
    out: list[str] = []
    if fa["version"] != fb["version"]:
        out.append(f"schema_version: {fa['version']} in {la}, {fb['version']} in {lb}")
    out += _only("table", fa["tables"], fb["tables"], la, lb)
    for name in sorted(set(fa["tables"]) & set(fb["tables"])):
        out += _table_diffs(name, fa["tables"][name], fb["tables"][name], la, lb)
    out += _only("index", fa["indexes"], fb["indexes"], la, lb)
    for name in sorted(set(fa["indexes"]) & set(fb["indexes"])):
        ia, ib = fa["indexes"][name], fb["indexes"][name]
        for i, what in ((0, "table"), (1, "key columns"), (2, "unique"), (3, "where")):
            if ia[i] != ib[i]:
                out.append(f"index {name}: {what} {ia[i]!r} in {la}, {ib[i]!r} in {lb}")
    out += _only("trigger", fa["triggers"], fb["triggers"], la, lb)
    for name in sorted(set(fa["triggers"]) & set(fb["triggers"])):
        if fa["triggers"][name] != fb["triggers"][name]:
            out.append(f"trigger {name}: {fa['triggers'][name]!r} in {la}, "
                       f"{fb['triggers'][name]!r} in {lb}")
    return out
