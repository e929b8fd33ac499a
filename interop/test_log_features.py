"""Log features of the tables Spark creates today: Spark creates a table with
row tracking (and deletion vectors); Quiver appends, upserts (deletion
vectors), commits a transaction precommitted before a kill -9, and
optimizes; Spark reads exactly the expected rows with every row id
(`_metadata.row_id`) unique and stable, DESCRIBE HISTORY and DETAIL work,
and Spark keeps writing; delta-rs reads the result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pytest

from data import apply_changelog, changelog_schema, table
from helpers import Quiver, Reader, Written, assert_rows, check_table, log_actions, readers

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64())])


def rows(ids: Any, tag: str) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"{tag}-{i}", "amount": i / 4} for i in ids]


def changelog(updated: list[int], deleted: list[int], inserted: list[int], tag: str) -> pa.Table:
    out = [{"id": i, "name": f"{tag}-u{i}", "amount": -i, "_op": "U"} for i in updated]
    out += [{"id": i, "name": None, "amount": None, "_op": "D"} for i in deleted]
    out += [{"id": i, "name": f"{tag}-i{i}", "amount": i, "_op": "I"} for i in inserted]
    return table(out, changelog_schema(SCHEMA))


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


@pytest.fixture(scope="module")
def row_tracked(quiver: Callable[..., Quiver], serve: Callable[..., Quiver], tables: Path,
                spark_session: Any) -> Written:
    path = tables / "row_tracking"
    s = spark_session
    s.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, name STRING, amount DOUBLE) USING delta TBLPROPERTIES "
          "('delta.enableRowTracking' = 'true', 'delta.enableDeletionVectors' = 'true', "
          "'delta.checkpointInterval' = '2')")
    state = {(r["id"],): r for r in rows(range(300), "spark")}
    s.createDataFrame(table(state.values(), SCHEMA)).repartition(2).write.format("delta").mode("append").save(str(path))
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
    check_ids(ids, after, {}, "optimize")
    assert after == ids, "optimize changed row ids or commit versions"
    srv.stop()

    hwm = [json.loads(d["configuration"])["rowIdHighWaterMark"]
           for d in log_actions(path, "domainMetadata") if d["domain"] == "delta.rowTracking"]
    assert hwm and hwm[-1] >= max(v[0] for v in ids.values()), (hwm, ids)
    for a in log_actions(path, "add"):
        assert a.get("baseRowId") is not None and a.get("defaultRowCommitVersion") is not None, a
    return Written(path, table(state.values(), SCHEMA), versions)


@pytest.mark.parametrize("reader_name", readers())
def test_row_tracking(row_tracked: Written, reader: Reader) -> None:
    check_table(reader, row_tracked)


def test_row_tracking_spark_writes_after(row_tracked: Written, spark_session: Any) -> None:
    """Spark's UPDATE and INSERT after Quiver's commits keep the row ids
    Quiver kept and assign fresh ones."""
    s, path = spark_session, row_tracked.path
    before = row_ids(s, path)
    s.sql(f"UPDATE delta.`{path}` SET name = 'spark-again' WHERE id % 7 = 0")
    s.sql(f"INSERT INTO delta.`{path}` VALUES (9000, 'spark-new', 1.0)")
    version = s.sql(f"DESCRIBE HISTORY delta.`{path}`").select("version").collect()[0][0]
    after = row_ids(s, path)
    check_ids(before, after, {k: version - 1 for k in before if k % 7 == 0}, "spark update")
    expected = [dict(r, name="spark-again") if r["id"] % 7 == 0 else r for r in row_tracked.expected.to_pylist()]
    expected.append({"id": 9000, "name": "spark-new", "amount": 1.0})
    got = s.read.format("delta").load(str(path)).toArrow()
    assert_rows(got, table(expected, SCHEMA), "spark after its own writes")
