"""Round trips: Quiver goes on writing tables that Spark or delta-rs wrote
(deletion vectors, OPTIMIZE, MERGE, checkpoints, ALTER TABLE), and both
readers read the result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from data import ID_NAME_AMOUNT as SCHEMA
from data import apply_changelog, changelog_schema, table
from data import id_name_changelog as changelog
from data import id_name_rows as rows
from helpers import Reader, Written, check_table, log_actions, readers



def quiver_writes(quiver: Any, path: Path, state: dict[Any, dict[str, Any]], dv: bool) -> list[int]:
    """Quiver appends 100 new ids and upserts (updates, deletes, inserts)
    into the table at path; state (key → row) follows."""
    srv = quiver(("append", {"table_uri": path}),
                 ("upsert", {"table_uri": path, "mode": "upsert", "merge_keys": ["id"], "deletion_vectors": dv}))
    c = srv.client()
    appended = table(rows(range(5000, 5100), "quiver"), SCHEMA)
    versions = [c.put("append", appended)["version"]]
    apply_changelog(state, appended, ["id"])
    live = sorted(k[0] for k in state)
    changes = changelog(live[2::10] + [5001], live[3::10], list(range(6000, 6050)), "quiver")
    versions.append(c.put("upsert", changes)["version"])
    apply_changelog(state, changes, ["id"])
    srv.stop()
    return versions


def keyed(rs: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {(r["id"],): r for r in rs}


# --- Spark's table with deletion vectors --------------------------------------


@pytest.fixture(scope="module")
def spark_dv(quiver: Any, tables: Path, spark_session: Any) -> Written:
    """Spark creates a table with deletion vectors, writes, DELETEs (which
    marks rows), OPTIMIZEs (which purges them) and DELETEs again; then
    Quiver appends and upserts with deletion vectors into it."""
    path = tables / "spark_dv"
    s = spark_session
    s.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, name STRING, amount DOUBLE) USING delta "
          "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.checkpointInterval' = '3')")
    state = keyed(rows(range(300), "spark"))
    s.createDataFrame(table(state.values(), SCHEMA)).repartition(2).write.format("delta").mode("append").save(str(path))
    for sql, gone in ((f"DELETE FROM delta.`{path}` WHERE id % 10 = 0", 0),
                      (f"OPTIMIZE delta.`{path}`", None),
                      (f"DELETE FROM delta.`{path}` WHERE id % 10 = 1", 1)):
        s.sql(sql)
        if gone is not None:
            state = {k: r for k, r in state.items() if r["id"] % 10 != gone}
    assert any(a.get("deletionVector") for a in log_actions(path, "add")), "Spark's DELETE wrote no deletion vector"
    versions = quiver_writes(quiver, path, state, dv=True)
    assert versions == [5, 6]  # create, write, delete, optimize, delete
    return Written(path, table(state.values(), SCHEMA), versions)


@pytest.mark.parametrize("reader_name", readers())
def test_spark_deletion_vectors_then_quiver(spark_dv: Written, reader: Reader) -> None:
    check_table(reader, spark_dv)


# --- delta-rs's table -----------------------------------------------------------


@pytest.fixture(scope="module")
def delta_rs_written(quiver: Any, tables: Path) -> Written:
    """delta-rs appends, overwrites, merges and checkpoints; then Quiver
    appends and upserts (copy-on-write) into the table."""
    from deltalake import DeltaTable, write_deltalake

    path = tables / "delta_rs"
    write_deltalake(str(path), table(rows(range(0, 100), "rs"), SCHEMA), mode="append")
    write_deltalake(str(path), table(rows(range(100, 200), "rs"), SCHEMA), mode="append")
    state = keyed(rows(range(50, 250), "rs-over"))
    write_deltalake(str(path), table(state.values(), SCHEMA), mode="overwrite")
    source = table(rows(range(200, 300), "rs-merge"), SCHEMA)
    (DeltaTable(str(path)).merge(source, "t.id = s.id", source_alias="s", target_alias="t")
     .when_matched_update_all().when_not_matched_insert_all().execute())
    apply_changelog(state, source, ["id"])
    DeltaTable(str(path)).create_checkpoint()
    versions = quiver_writes(quiver, path, state, dv=False)
    assert versions == [4, 5]
    return Written(path, table(state.values(), SCHEMA), versions)


@pytest.mark.parametrize("reader_name", readers())
def test_delta_rs_then_quiver(delta_rs_written: Written, reader: Reader) -> None:
    check_table(reader, delta_rs_written)


# --- Spark alters Quiver's table ---------------------------------------------------


@pytest.fixture(scope="module")
def altered(quiver: Any, tables: Path, spark_session: Any) -> Written:
    """Quiver creates a table; Spark appends to it, adds a column and sets
    table properties (a custom one, delta.checkpointInterval 3,
    delta.dataSkippingNumIndexedCols 1) while Quiver's server runs; Quiver
    goes on appending and upserting with the new column."""
    path = tables / "altered"
    srv = quiver(("append", {"table_uri": path}),
                 ("upsert", {"table_uri": path, "mode": "upsert", "merge_keys": ["id"]}))
    c = srv.client()
    first = table(rows(range(100), "quiver"), SCHEMA)
    versions = [c.put("append", first)["version"]]
    by_spark = table(rows(range(100, 200), "spark"), SCHEMA)
    spark_session.createDataFrame(by_spark).write.format("delta").mode("append").save(str(path))
    spark_session.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (extra STRING)")
    spark_session.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('quiver.interop' = 'kept', "
                      "'delta.checkpointInterval' = '3', 'delta.dataSkippingNumIndexedCols' = '1')")
    wide = SCHEMA.append(pa.field("extra", pa.string()))
    state = keyed(first.to_pylist() + by_spark.to_pylist())
    for r in state.values():
        r["extra"] = None
    more = table(({**r, "extra": f"x{r['id']}"} for r in rows(range(200, 250), "quiver")), wide)
    versions.append(c.put("append", more)["version"])
    apply_changelog(state, more, ["id"])
    changes = table([{"id": i, "name": "upserted", "amount": 0.0, "extra": "u", "_op": "U"} for i in (5, 150, 210, 999)]
                    + [{"id": i, "name": None, "amount": None, "extra": None, "_op": "D"} for i in (6, 151, 211)],
                    changelog_schema(wide))
    versions.append(c.put("upsert", changes)["version"])
    apply_changelog(state, changes, ["id"])
    last = table(({**r, "extra": None} for r in rows(range(300, 310), "quiver")), wide)
    versions.append(c.put("append", last)["version"])
    apply_changelog(state, last, ["id"])
    assert versions == [0, 4, 5, 6]
    return Written(path, table(state.values(), wide), versions)


@pytest.mark.parametrize("reader_name", readers())
def test_spark_alters_quiver_table(altered: Written, reader: Reader) -> None:
    check_table(reader, altered)


def test_quiver_keeps_spark_properties(altered: Written) -> None:
    """Quiver's later commits keep Spark's properties, checkpoint by the
    table's interval (3: version 6 is Quiver's) and take statistics of the
    first column only (delta.dataSkippingNumIndexedCols 1)."""
    from deltalake import DeltaTable

    conf = DeltaTable(str(altered.path)).metadata().configuration
    assert conf.get("quiver.interop") == "kept" and conf.get("delta.checkpointInterval") == "3", conf
    log = altered.path / "_delta_log"
    assert (log / f"{6:020d}.checkpoint.parquet").is_file()
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 6
    for version in (4, 5, 6):
        commit = [json.loads(line) for line in (log / f"{version:020d}.json").read_text().splitlines() if line]
        assert commit[0]["commitInfo"]["engineInfo"].startswith("quiver"), commit[0]
        for add in (a["add"] for a in commit if "add" in a):
            stats = json.loads(add["stats"])
            assert list(stats["minValues"]) == ["id"] and list(stats["nullCount"]) == ["id"], stats


# --- Spark's timestamp partitions, a key of Quiver's upsert -------------------------

TS_SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.string())])


@pytest.fixture(scope="module")
def spark_ts_partitions(quiver: Any, tables: Path, spark_session: Any) -> Written:
    """Spark writes a table partitioned by a timestamp with its legacy
    spelling of partition values ('yyyy-MM-dd HH:mm:ss[.SSSSSS]'); Quiver
    upserts by (id, ts):
    keys Spark wrote are updated in place, never inserted a second time."""
    import datetime as dt

    path = tables / "spark_ts_partitions"
    stamps = [dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
              dt.datetime(2026, 1, 1, 12, 34, 56, 123456, tzinfo=dt.timezone.utc)]
    first = table(({"id": i, "ts": stamps[i % 2], "v": "spark"} for i in range(20)), TS_SCHEMA)
    # Delta 4 spells new timestamp partition values in ISO 8601 with a zone;
    # older Spark (and this option) spell them in the session's zone (UTC).
    legacy = "spark.databricks.delta.write.utcTimestampPartitionValues"
    spark_session.conf.set(legacy, "false")
    try:
        spark_session.createDataFrame(first).write.format("delta").partitionBy("ts").save(str(path))
    finally:
        spark_session.conf.unset(legacy)
    spelled = {a["partitionValues"]["ts"] for a in log_actions(path, "add")}
    assert any(" " in v for v in spelled), spelled  # Spark's spelling, not ISO 8601
    srv = quiver(("upsert", {"table_uri": path, "mode": "upsert", "merge_keys": ["id", "ts"],
                             "partition_by": ["ts"]}))
    changes = table([{"id": i, "ts": stamps[i % 2], "v": "quiver", "_op": "U"} for i in range(0, 20, 3)]
                    + [{"id": 100, "ts": stamps[1], "v": "quiver", "_op": "I"},
                       {"id": 1, "ts": stamps[1], "v": None, "_op": "D"}], changelog_schema(TS_SCHEMA))
    version = srv.client().put("upsert", changes)["version"]
    state = {(r["id"], r["ts"]): r for r in first.to_pylist()}
    apply_changelog(state, changes, ["id", "ts"])
    return Written(path, table(state.values(), TS_SCHEMA), [version])


@pytest.mark.parametrize("reader_name", readers())
def test_spark_timestamp_partitions_then_quiver_upsert(spark_ts_partitions: Written, reader: Reader) -> None:
    check_table(reader, spark_ts_partitions)
