"""Partition values spelled like the null partition (issue #33, item 6):
the string "__HIVE_DEFAULT_PARTITION__", null and "" share the directory
p=__HIVE_DEFAULT_PARTITION__. Quiver once put them in one file whose
partition value was its first row's, and optimize merged them, so readers
saw "" as the literal string, nulls as the string or the string as null,
depending on how batches were spread over the encoders. Spark and delta-rs
must read each row's partition value as Spark itself writes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from data import table
from helpers import Quiver, Reader, assert_rows, log_actions, readers

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])
# One stream per order, one row per batch: the spellings meet in every
# order, around a plain value.
ORDERS = [
    [HIVE_NULL, None, "", "a", None, HIVE_NULL, "", "a"],
    [None, HIVE_NULL, "", None, "a", ""],
    ["", HIVE_NULL, None, "", HIVE_NULL],
]


def rows() -> list[dict[str, Any]]:
    out, i = [], 0
    for order in ORDERS:
        for p in order:
            out.append({"id": i, "p": p})
            i += 1
    return out


@pytest.fixture(scope="module")
def quiver_table(quiver: Any, tables: Path) -> Path:
    """The rows written by Quiver, one auto-commit stream per order, then
    compacted by optimize (which must keep every row's value)."""
    server: Quiver = quiver(("spelled", {"table_uri": tables / "spelled", "partition_by": ["p"]}))
    c = server.client()
    i = 0
    for order in ORDERS:
        c.put("spelled", table(rows()[i:i + len(order)], SCHEMA), chunk=1)
        i += len(order)
    res = c.action("optimize", endpoint="spelled")
    assert res["files_removed"] > 0, res
    return server.table_path("spelled")


@pytest.fixture(scope="module")
def spark_table(spark_session: Any, tables: Path) -> Path:
    """The same rows written by Spark (delta-spark), the reference."""
    path = tables / "spelled_by_spark"
    df = spark_session.createDataFrame([(r["id"], r["p"]) for r in rows()], "id long, p string")
    df.write.format("delta").partitionBy("p").save(str(path))
    return path


def test_spark_writes_every_spelling_as_null(spark_table: Path) -> None:
    """What Quiver matches (docs/delta.md): Spark writes "", null and the
    string __HIVE_DEFAULT_PARTITION__ all as a null partition value."""
    values = {a["partitionValues"]["p"] for a in log_actions(spark_table, "add")}
    assert values == {None, "a"}, values


@pytest.mark.parametrize("reader_name", readers())
def test_reads_as_spark_wrote(quiver_table: Path, spark_table: Path, reader: Reader) -> None:
    expected = reader.rows(spark_table).select(["id", "p"])
    want = table([{"id": r["id"], "p": None if r["p"] in ("", HIVE_NULL) else r["p"]} for r in rows()], SCHEMA)
    assert_rows(expected, want, f"{reader.name} on Spark's table")
    assert_rows(reader.rows(quiver_table).select(["id", "p"]), expected, f"{reader.name} on Quiver's table")


def test_log_partition_values(quiver_table: Path) -> None:
    """Quiver's log, optimize included, holds null for every spelling."""
    values = {a["partitionValues"]["p"] for a in log_actions(quiver_table, "add")}
    assert values == {None, "a"}, values
