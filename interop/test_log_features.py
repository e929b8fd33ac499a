"""Log features of the tables Databricks creates today. Spark creates a table
with every feature of a new Databricks table (column mapping in name mode,
liquid clustering, row tracking, deletion vectors, V2 checkpoints,
in-commit timestamps, checkpoint interval 2); Quiver appends, upserts with deletion
vectors, commits a transaction precommitted before a kill -9, and
optimizes; Spark reads exactly the expected rows with every row id
(`_metadata.row_id`) unique and stable, DESCRIBE HISTORY and DETAIL work,
Spark keeps writing (a V2 checkpoint with a sidecar) and Quiver after it;
delta-rs reads the result. One table for all features keeps the suite
short; the Go tests cover each feature alone."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

import pyarrow.parquet as pq
import pytest

from data import ID_NAME_AMOUNT as SCHEMA
from data import apply_changelog, table
from data import id_name_changelog as changelog
from data import id_name_rows as rows
from helpers import Quiver, Reader, Written, assert_rows, check_table, log_actions, readers



def row_ids(spark: Any, path: Path) -> dict[int, tuple[int, int]]:
    """id → (row id, row commit version) as Spark reads them; row ids must
    be unique."""
    got = spark.read.format("delta").load(str(path)).select(
        "id", "_metadata.row_id", "_metadata.row_commit_version").collect()
    out = {r[0]: (r[1], r[2]) for r in got}
    assert len(out) == len(got), "a key twice"
    ids = [v[0] for v in out.values()]
    assert None not in ids and len(set(ids)) == len(ids), "row ids are not unique"
    return out


def check_ids(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]],
              updated: dict[int, int], step: str) -> None:
    """Keys live in both keep their row id; their commit version is
    updated[key] when given, else unchanged; new keys have fresh ids."""
    old_ids = {v[0] for v in before.values()}
    for k, (rid, ver) in after.items():
        if k in before:
            want = (before[k][0], updated.get(k, before[k][1]))
            assert (rid, ver) == want, f"{step}: key {k} has row id/version {(rid, ver)}, want {want}"
        else:
            assert rid not in old_ids, f"{step}: new key {k} reuses row id {rid}"


def spark_creates(s: Any, path: Path, props: dict[str, str]) -> dict[Any, dict[str, Any]]:
    """Spark creates the table, clustered by id, with props and appends 300
    rows in 2 files; returns the rows by key."""
    tbl = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    s.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, name STRING, amount DOUBLE) USING delta "
          f"CLUSTER BY (id) TBLPROPERTIES ({tbl})")
    state = {(r["id"],): r for r in rows(range(300), "spark")}
    s.createDataFrame(table(state.values(), SCHEMA)).repartition(2).write.format("delta").mode("append").save(str(path))
    return state


def quiver_writes(quiver: Callable[..., Quiver], serve: Callable[..., Quiver], s: Any, path: Path,
                  state: dict[Any, dict[str, Any]]) -> list[int]:
    """Quiver appends, upserts with deletion vectors, commits a transaction
    precommitted before a kill -9 (and its replay), and optimizes; after
    each step Spark's row ids are checked (check_ids). state follows;
    returns the versions Quiver committed."""
    ids = row_ids(s, path)
    srv = quiver(("append", {"table_uri": path}),
                 ("upsert", {"table_uri": path, "mode": "upsert", "merge_keys": ["id"], "deletion_vectors": True}))
    c = srv.client()
    appended = table(rows(range(5000, 5100), "quiver"), SCHEMA)
    versions = [c.put("append", appended)["version"]]
    apply_changelog(state, appended, ["id"])
    after = row_ids(s, path)
    check_ids(ids, after, {}, "append")
    ids = after

    upd = list(range(2, 300, 10)) + [5001]
    changes = changelog(upd, list(range(3, 300, 10)), list(range(6000, 6050)), "quiver")
    versions.append(c.put("upsert", changes)["version"])
    apply_changelog(state, changes, ["id"])
    after = row_ids(s, path)
    check_ids(ids, after, dict.fromkeys(upd, versions[-1]), "upsert")
    ids = after

    # A transaction precommitted, the server killed, its commit replayed
    # after the restart: committed once.
    upd = list(range(4, 300, 10)) + [6001, 5002]
    changes = changelog(upd, [5], list(range(7000, 7010)), "txn")
    assert c.action("begin", writer="rt", epoch=1)["state"] == "open"
    assert c.put_txn("upsert", "rt", 1, changes)["staged"] is True
    assert c.action("precommit", writer="rt", epoch=1)["state"] == "precommitted"
    srv.kill()
    srv = serve(srv.endpoints, workdir=srv.workdir)
    c = srv.client()
    done = c.action("commit", writer="rt", epoch=1)
    assert done["state"] == "committed" and not done.get("replayed"), done
    again = c.action("commit", writer="rt", epoch=1)
    assert again["state"] == "committed" and again.get("replayed") is True, again
    versions.append(versions[-1] + 1)
    apply_changelog(state, changes, ["id"])
    after = row_ids(s, path)
    check_ids(ids, after, dict.fromkeys(upd, versions[-1]), "transaction")
    ids = after

    res = c.action("optimize", endpoint="upsert")
    assert res["files_removed"] > 1, res
    versions.append(res["version"])
    after = row_ids(s, path)
    assert after == ids, "optimize changed row ids or commit versions"
    srv.stop()

    hwm = [json.loads(d["configuration"])["rowIdHighWaterMark"]
           for d in log_actions(path, "domainMetadata") if d["domain"] == "delta.rowTracking"]
    assert hwm and hwm[-1] >= max(v[0] for v in ids.values()), (hwm, ids)
    for a in log_actions(path, "add"):
        assert a.get("baseRowId") is not None and a.get("defaultRowCommitVersion") is not None, a
    return versions


def spark_writes_after(written: Written, s: Any) -> list[dict[str, Any]]:
    """Spark's UPDATE and INSERT after Quiver's commits keep the row ids
    Quiver kept and assign fresh ones; returns the rows expected after."""
    path = written.path
    before = row_ids(s, path)
    s.sql(f"UPDATE delta.`{path}` SET name = 'spark-again' WHERE id % 7 = 0")
    s.sql(f"INSERT INTO delta.`{path}` VALUES (9000, 'spark-new', 1.0)")
    version = s.sql(f"DESCRIBE HISTORY delta.`{path}`").select("version").collect()[0][0]
    after = row_ids(s, path)
    check_ids(before, after, {k: version - 1 for k in before if k % 7 == 0}, "spark update")
    expected = [dict(r, name="spark-again") if r["id"] % 7 == 0 else r for r in written.expected.to_pylist()]
    expected.append({"id": 9000, "name": "spark-new", "amount": 1.0})
    assert_rows(s.read.format("delta").load(str(path)).toArrow(), table(expected, SCHEMA), "spark after its own writes")
    return expected


# --- every feature of a new Databricks table at once ---------------------------


ALL_FEATURES = {
    "delta.columnMapping.mode": "name",
    "delta.enableRowTracking": "true",
    "delta.enableDeletionVectors": "true",
    "delta.checkpointPolicy": "v2",
    "delta.enableInCommitTimestamps": "true",
    "delta.checkpointInterval": "2",
}


@pytest.fixture(scope="module")
def all_features(quiver: Callable[..., Quiver], serve: Callable[..., Quiver], tables: Path,
                 spark_session: Any) -> Written:
    """A table as new Databricks tables are created (column mapping in name
    mode, liquid clustering, row tracking, deletion vectors, V2
    checkpoints, in-commit timestamps, checkpoint interval 2), written by
    Quiver as in quiver_writes."""
    path = tables / "all_features"
    state = spark_creates(spark_session, path, ALL_FEATURES)
    versions = quiver_writes(quiver, serve, spark_session, path, state)
    return Written(path, table(state.values(), SCHEMA), versions)


@pytest.mark.parametrize("reader_name", readers())
def test_all_features(all_features: Written, reader: Reader) -> None:
    check_table(reader, all_features)


def test_all_features_log(all_features: Written, spark_session: Any) -> None:
    """Quiver's commits put commitInfo first with in-commit timestamps
    increasing over every version; its checkpoints are UUID-named V2 ones;
    the clustering domain and the properties Spark created the table with
    are intact."""
    log = all_features.path / "_delta_log"
    icts = []
    for f in sorted(log.glob("*.json")):
        if ".checkpoint." in f.name:
            continue
        first = json.loads(f.read_text().splitlines()[0])
        assert "commitInfo" in first, f"{f.name}: first action {list(first)}"
        icts.append(first["commitInfo"]["inCommitTimestamp"])
    assert icts == sorted(icts) and len(set(icts)) == len(icts), icts
    for v in all_features.versions:
        if v % 2 == 0:
            assert list(log.glob(f"{v:020d}.checkpoint.*-*.json")), f"no V2 checkpoint of version {v}"
    assert not list(log.glob("*.checkpoint.parquet")), "a classic checkpoint in a V2 table"
    detail = spark_session.sql(f"DESCRIBE DETAIL delta.`{all_features.path}`").collect()[0]
    assert detail.clusteringColumns == ["id"], detail
    created = log_actions(all_features.path, "metaData")[0]["configuration"]
    assert ALL_FEATURES.items() <= created.items(), created
    assert created.items() <= detail.properties.items(), (created, detail.properties)


def test_all_features_physical_names(all_features: Written) -> None:
    """Column mapping with row tracking: every file Quiver wrote holds the
    physical column names (with field ids) and, once rewritten (upsert,
    optimize), the materialized row id and commit version columns under
    the names the table gives them; stats are keyed by physical names."""
    conf = log_actions(all_features.path, "metaData")[0]["configuration"]
    schema = json.loads(log_actions(all_features.path, "metaData")[-1]["schemaString"])
    physical = {f["metadata"]["delta.columnMapping.physicalName"]: f["metadata"]["delta.columnMapping.id"]
                for f in schema["fields"]}
    assert not physical.keys() & {"id", "name", "amount"}, physical
    hidden = {conf["delta.rowTracking.materializedRowIdColumnName"],
              conf["delta.rowTracking.materializedRowCommitVersionColumnName"]}
    materialized = 0
    for a in log_actions(all_features.path, "add"):
        if ".zstd." not in a["path"]:
            continue  # Spark's files
        assert set(json.loads(a["stats"])["nullCount"]) <= physical.keys(), a["stats"]
        fields = pq.read_schema(all_features.path / a["path"])
        for f in fields:
            if f.name in hidden:
                continue
            assert f.name in physical, f"{a['path']}: column {f.name} is no physical name"
            assert int(f.metadata[b"PARQUET:field_id"]) == physical[f.name], (a["path"], f)
        materialized += hidden <= set(fields.names)
    assert materialized, "no file Quiver rewrote holds the materialized row tracking columns"


def test_all_features_spark_then_quiver(all_features: Written, quiver: Callable[..., Quiver],
                                        spark_session: Any) -> None:
    """Spark keeps writing (its V2 checkpoint with sidecars included), and
    Quiver appends on top of Spark's checkpoint: the commits below it are
    deleted first (as log cleanup does), so Quiver's load must read it and
    its sidecars."""
    expected = spark_writes_after(all_features, spark_session)
    log = all_features.path / "_delta_log"
    assert list((log / "_sidecars").glob("*.parquet")), "Spark's V2 checkpoint has no sidecar"
    names = [f.name for f in log.iterdir()]
    newest = max(int(n[:20]) for n in names if re.fullmatch(r"\d{20}\.checkpoint\..*\.(json|parquet)", n))
    spark_version = spark_session.sql(f"DESCRIBE HISTORY delta.`{all_features.path}`").select("version").collect()[0][0]
    assert newest >= spark_version - 1, f"newest checkpoint {newest} is not Spark's (its commits end at {spark_version})"
    for n in names:
        if re.fullmatch(r"\d{20}\.json", n) and int(n[:20]) < newest:
            (log / n).unlink()
    srv = quiver(("append", {"table_uri": all_features.path}))
    more = table(rows(range(9100, 9110), "after"), SCHEMA)
    srv.client().put("append", more)
    srv.stop()
    got = spark_session.read.format("delta").load(str(all_features.path)).toArrow()
    assert_rows(got, table(expected + more.to_pylist(), SCHEMA), "spark after Quiver's last append")
    row_ids(spark_session, all_features.path)
