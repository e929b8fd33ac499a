"""Arrow tables the interop tests send, and the changelog arithmetic that
says what an upserted table must hold."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any, Iterable

import pyarrow as pa

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 1, 1, tzinfo=UTC)

# One column per Delta type Quiver writes (timestamp_ntz has tests of its own).
TYPED = pa.schema([
    ("id", pa.int64()),
    ("i8", pa.int8()),
    ("i16", pa.int16()),
    ("i32", pa.int32()),
    ("f32", pa.float32()),
    ("f64", pa.float64()),
    ("flag", pa.bool_()),
    ("s", pa.string()),
    ("bin", pa.binary()),
    ("day", pa.date32()),
    ("ts", pa.timestamp("us", tz="UTC")),
    ("dec", pa.decimal128(18, 3)),
    ("st", pa.struct([("a", pa.int32()), ("b", pa.string())])),
    ("l", pa.list_(pa.int64())),
    ("m", pa.map_(pa.string(), pa.int64())),
])


def typed(start: int, n: int) -> pa.Table:
    """n rows of TYPED with ids start.., nulls in every nullable column,
    NaN and infinities among the floats, non-ASCII strings."""
    rows: list[dict[str, Any]] = []
    for i in range(start, start + n):
        null = i % 7 == 3
        rows.append({
            "id": i,
            "i8": None if null else i % 256 - 128,
            "i16": None if null else i % 65536 - 32768,
            "i32": None if null else i * 7919 - 2**30,
            "f32": None if null else [1.5, float("nan"), float("inf"), -0.25][i % 4],
            "f64": None if null else [float("-inf"), 1e300, float("nan"), i / 3][i % 4],
            "flag": None if null else i % 2 == 0,
            "s": None if null else ["", "ascii", "ünïcødé ✓", "日本語", "a\tb\nc"][i % 5] + str(i),
            "bin": None if null else bytes([i % 256, 0, 255]),
            "day": None if null else dt.date(1969, 12, 31) + dt.timedelta(days=i % 20000),
            "ts": None if null else T0 + dt.timedelta(seconds=i * 3601, microseconds=i % 1000),
            "dec": None if null else decimal.Decimal(i * 1001 - 500_000) / 1000,
            "st": None if null else {"a": i, "b": None if i % 2 else f"b{i}"},
            "l": None if null else [i, None, -i][: i % 4],
            "m": None if null else [("k", i), ("z", None)][: i % 3],
        })
    return pa.Table.from_pylist(rows, schema=TYPED)


def table(rows: Iterable[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=schema)


def apply_changelog(state: dict[Any, dict[str, Any]], changes: pa.Table, keys: list[str]) -> None:
    """Applies a changelog to state (key → row) the way Quiver's upsert does
    without __weight: the last row of a key wins; _op D deletes it, any
    other _op (or none) upserts it; _op and _ts_ms never reach the table."""
    for row in changes.to_pylist():
        op = row.pop("_op", None)
        row.pop("_ts_ms", None)
        key = tuple(row[k] for k in keys)
        if op == "D":
            state.pop(key, None)
        else:
            state[key] = row


def changelog_schema(schema: pa.Schema) -> pa.Schema:
    return schema.append(pa.field("_op", pa.string()))


# Keyed rows of the round-trip tests (tables other writers created).
ID_NAME_AMOUNT = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64())])


def id_name_rows(ids: Iterable[int], tag: str) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"{tag}-{i}", "amount": i / 4} for i in ids]


def id_name_changelog(updated: list[int], deleted: list[int], inserted: list[int], tag: str) -> pa.Table:
    """Updates (_op U), deletes (D) and inserts (I) of ID_NAME_AMOUNT rows."""
    out = [{"id": i, "name": f"{tag}-u{i}", "amount": -i, "_op": "U"} for i in updated]
    out += [{"id": i, "name": None, "amount": None, "_op": "D"} for i in deleted]
    out += [{"id": i, "name": f"{tag}-i{i}", "amount": i, "_op": "I"} for i in inserted]
    return table(out, changelog_schema(ID_NAME_AMOUNT))
