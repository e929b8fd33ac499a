"""Table maintenance of a Delta endpoint through a real `quiver serve`:
after the optimize and vacuum actions Spark and delta-rs read exactly the
rows they read before, time travel inside the retention works, writes go
on (Quiver's and Spark's), and a kill -9 in the middle of optimize or
vacuum leaves the table readable with no row lost or duplicated."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pytest

from data import apply_changelog, changelog_schema, table
from helpers import DeltaRs, Quiver, Spark, assert_rows, log_actions

SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string()), ("n", pa.int64())])
REGIONS = ("eu", "us", "ap")
# Vacuum may delete what the latest version no longer references at once:
# the tests choose the retention per call.
MAINTENANCE = {"vacuum_retention": "0s", "vacuum_min_retention": "0s"}


def endpoints(path: Path) -> list[dict[str, Any]]:
    """An upsert endpoint with deletion vectors and an append endpoint on
    the same table, partitioned by region."""
    uri = "file://" + str(path)
    common = {"table_uri": uri, "partition_by": ["region"], "deletion_vectors": True}
    return [
        {"name": "up", "sink": "delta", "delta": {**common, "mode": "upsert", "merge_keys": ["id"]},
         "maintenance": MAINTENANCE},
        {"name": "app", "sink": "delta", "delta": common, "maintenance": MAINTENANCE},
    ]


def rows(ids: range, n: int) -> list[dict[str, Any]]:
    return [{"id": i, "region": REGIONS[i % 3], "n": n} for i in ids]


class Model:
    """What the table must hold: the rows by id."""

    def __init__(self) -> None:
        self.state: dict[Any, dict[str, Any]] = {}

    def append(self, c: Any, batch: list[dict[str, Any]]) -> int:
        version = c.put("app", table(batch, SCHEMA))["version"]
        apply_changelog(self.state, table(batch, SCHEMA), ["id"])
        return version

    def upsert(self, c: Any, changes: list[dict[str, Any]]) -> int:
        t = table(changes, changelog_schema(SCHEMA))
        version = c.put("up", t)["version"]
        apply_changelog(self.state, t, ["id"])
        return version

    def expected(self) -> pa.Table:
        return table(self.state.values(), SCHEMA)


def small_files(c: Any, model: Model, appends: int) -> None:
    """appends small appends of 30 rows, then two upserts updating and
    deleting rows of every file (deletion vectors)."""
    for k in range(appends):
        model.append(c, rows(range(k * 30, k * 30 + 30), 0))
    for r in (1, 2):
        changes = [{**row, "n": r, "_op": "D" if row["id"] % 11 == 0 else "U"}
                   for row in rows(range(r, appends * 30, 7), r)]
        model.upsert(c, changes)


def data_files(path: Path) -> set[Path]:
    return set(path.rglob("*.parquet")) - set((path / "_delta_log").rglob("*"))


def kill_during(srv: Quiver, op: str, started: Callable[[], bool], **body: Any) -> list[BaseException]:
    """Runs the action op (body) on srv in a thread and kills the server
    with -9 once started() holds (polled every millisecond: maintenance may
    take milliseconds); returns what the action raised (empty when it
    finished first)."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            srv.client().action(op, **body)
        except Exception as e:  # the server dies under it
            failed.append(e)

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 60
    while not started():
        assert time.monotonic() < deadline, f"{op} did not start within 60 s\n{srv.log()}"
        time.sleep(0.001)
    srv.kill()
    t.join()
    return failed


def test_optimize_vacuum_delta(serve: Callable[..., Quiver], tables: Path, spark_session: Any) -> None:
    path = tables / "maintained"
    srv = serve(endpoints(path))
    c = srv.client()
    model = Model()
    small_files(c, model, 12)
    spark, delta_rs = Spark(spark_session), DeltaRs()
    before = log_actions(path, "commitInfo")
    v_before = len(before) - 1
    expected = model.expected()
    for reader in (spark, delta_rs):
        assert_rows(reader.rows(path), expected, reader.name)

    res = c.action("optimize", endpoint="up")
    assert res["endpoint"] == "up" and res["version"] == v_before + 1, res
    assert res["files_removed"] >= 12 and res["files_added"] == len(REGIONS) and res["rows"] == expected.num_rows, res
    info = log_actions(path, "commitInfo")[-1]
    assert info["operation"] == "OPTIMIZE" and info["operationParameters"]["zOrderBy"] == "[]", info
    assert not [a for a in log_actions(path, "add")[-len(REGIONS):] if a["dataChange"] or a.get("deletionVector")]
    for reader in (spark, delta_rs):
        assert_rows(reader.rows(path), expected, f"{reader.name} after optimize")
    history = spark_session.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert history[0].operation == "OPTIMIZE" and history[0].version == res["version"], history[0]
    # A second optimize has nothing left to do.
    assert c.action("optimize", endpoint="up")["files_removed"] == 0

    # A retention of an hour deletes nothing optimize just removed: time travel still works.
    kept = c.action("vacuum", endpoint="up", retention_hours=1)
    assert kept["files_deleted"] == 0, kept
    old = spark_session.read.format("delta").option("versionAsOf", v_before).load(str(path)).toArrow()
    assert_rows(old, expected, "spark, time travel to the version before optimize")
    from deltalake import DeltaTable, QueryBuilder

    old = pa.table(QueryBuilder().register("t", DeltaTable(str(path), version=v_before)).execute("SELECT * FROM t").read_all())
    assert_rows(old, expected, "delta-rs, time travel to the version before optimize")

    files = data_files(path)
    dry = c.action("vacuum", endpoint="up", retention_hours=0, dry_run=True)
    assert dry["dry_run"] and dry["files_deleted"] >= 12 and data_files(path) == files, dry
    done = c.action("vacuum", endpoint="up", retention_hours=0)
    assert done["files_deleted"] == dry["files_deleted"] and done["bytes_deleted"] == dry["bytes_deleted"], done
    assert len(data_files(path)) == len(REGIONS)
    assert not list(path.rglob("deletion_vector_*.bin")), "deletion vectors survived the vacuum"
    for reader in (spark, delta_rs):
        assert_rows(reader.rows(path), expected, f"{reader.name} after vacuum")

    # Writes go on: Quiver's upserts and appends, and Spark's append.
    model.upsert(c, [{"id": 0, "region": "eu", "n": 9, "_op": "U"}, {"id": 1, "region": "us", "n": 0, "_op": "D"}])
    model.append(c, rows(range(5000, 5010), 3))
    spark_rows = rows(range(6000, 6005), 4)
    spark_session.createDataFrame(table(spark_rows, SCHEMA)).coalesce(1).write.format("delta").mode("append").save(str(path))
    apply_changelog(model.state, table(spark_rows, SCHEMA), ["id"])
    model.upsert(c, [{"id": 6001, "region": "us", "n": 8, "_op": "U"}])
    for reader in (spark, delta_rs):
        assert_rows(reader.rows(path), model.expected(), f"{reader.name} after writes following maintenance")
    srv.stop()


@pytest.mark.parametrize("op", ["optimize", "vacuum"])
def test_kill_9_during_maintenance(serve: Callable[..., Quiver], tmp_path: Path, op: str) -> None:
    """kill -9 while optimize (or vacuum) runs: after the restart the table
    reads exactly the rows written, and maintenance completes."""
    path = tmp_path / "table"
    workdir = tmp_path / "server"
    srv = serve(endpoints(path), workdir=workdir)
    c = srv.client()
    model = Model()
    small_files(c, model, 60)
    if op == "vacuum":
        c.action("optimize", endpoint="up")
    live = data_files(path)
    commits = len(log_actions(path, "commitInfo"))

    body = {"retention_hours": 0} if op == "vacuum" else {}
    # Kill once the operation has visibly started: new files (optimize) or
    # fewer files (vacuum).
    failed = kill_during(srv, op, lambda: data_files(path) != live, endpoint="up", **body)
    assert not [e for e in failed if "InvalidArgument" in str(e) or "invalid" in str(e)], failed
    print(f"kill -9 {'during' if failed else 'after'} {op}")
    assert len(log_actions(path, "commitInfo")) in (commits, commits + 1)

    srv = serve(endpoints(path), workdir=workdir)
    assert_rows(DeltaRs().rows(path), model.expected(), f"delta-rs after kill -9 during {op}")
    c = srv.client()
    c.action("optimize", endpoint="up")
    c.action("vacuum", endpoint="up", retention_hours=0)
    model.append(c, rows(range(9000, 9003), 5))
    assert_rows(DeltaRs().rows(path), model.expected(), f"delta-rs after maintenance completed ({op} killed before)")
    srv.stop()


def test_lance_vacuum_kill_9(serve: Callable[..., Quiver], tmp_path: Path) -> None:
    """Lance: vacuum through the action, killed -9 while it deletes; after
    the restart pylance reads exactly the rows written, the writer's epoch
    is still known (exactly-once), a second vacuum completes, and the
    versions left, the latest and the one holding the epoch, read back."""
    import lance

    path = tmp_path / "items.lance"
    workdir = tmp_path / "server"
    eps = [{"name": "items", "sink": "lance", "lance": {"dataset_uri": "file://" + str(path)}, "maintenance": MAINTENANCE}]
    srv = serve(eps, workdir=workdir)
    c = srv.client()
    schema = pa.schema([("id", pa.int64()), ("n", pa.int64())])
    sent = [table([{"id": i, "n": 0} for i in range(100)], schema)]
    c.put("items", sent[0])
    job = table([{"id": i, "n": 1} for i in range(100, 110)], schema)
    job_version = c.txn("job", 1, [("items", job)])["endpoints"]["items"]["version"]
    sent.append(job)
    for k in range(200):
        t = table([{"id": 1000 + k * 10 + i, "n": 2} for i in range(10)], schema)
        c.put("items", t)
        sent.append(t)
    expected = pa.concat_tables(sent)
    manifests = lambda: len(list((path / "_versions").glob("*.manifest")))  # noqa: E731
    before = manifests()

    failed = kill_during(srv, "vacuum", lambda: manifests() != before, endpoint="items", retention_hours=0)
    print(f"kill -9 {'during' if failed else 'after'} the Lance vacuum ({manifests()} of {before} manifests left)")
    assert_rows(lance.dataset(str(path)).to_table(), expected, "pylance after kill -9 during vacuum")

    srv = serve(eps, workdir=workdir)
    c = srv.client()
    assert c.action("committed-epoch", endpoint="items", writer="job")["epoch"] == 1
    done = c.action("vacuum", endpoint="items", retention_hours=0)
    assert done["endpoint"] == "items" and not done["dry_run"], done
    ds = lance.dataset(str(path))
    assert_rows(ds.to_table(), expected, "pylance after vacuum")
    left = sorted(v["version"] for v in ds.versions())
    assert left == [job_version, ds.version], f"versions left {left}, want the epoch's {job_version} and the latest"
    assert lance.dataset(str(path), version=job_version).count_rows() == 110
    more = table([{"id": 5000, "n": 3}], schema)
    c.put("items", more)
    assert_rows(lance.dataset(str(path)).to_table(), pa.concat_tables([expected, more]), "pylance after an append following vacuum")
    srv.stop()


def test_lance_optimize(serve: Callable[..., Quiver], tmp_path: Path) -> None:
    """Lance: the optimize action compacts the small fragments of appends
    and merges (deletions materialized) in one Rewrite version; pylance and
    LanceDB read exactly the same rows from fewer fragments, time travel to
    the version before still works, the scalar and vector indices pylance
    built (on the first fragments, which optimize leaves alone) answer
    LanceDB's index queries correctly, and writes go on: pylance's append,
    merge_insert and its own compact_files, Quiver's merges and a second
    optimize."""
    import lance
    import lancedb

    db = tmp_path / "db"
    path = db / "items.lance"
    uri = "file://" + str(path)
    eps = [
        {"name": "items", "sink": "lance", "lance": {"dataset_uri": uri}, "maintenance": MAINTENANCE},
        {"name": "up", "sink": "lance", "lance": {"dataset_uri": uri, "mode": "merge_insert", "on": ["id"]},
         "maintenance": MAINTENANCE},
    ]
    srv = serve(eps)
    c = srv.client()
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("vec", pa.list_(pa.float32(), 4))])
    state: dict[int, dict[str, Any]] = {}

    def batch(ids: Any, tag: str) -> pa.Table:
        return table([{"id": i, "name": f"{tag}{i}", "vec": [float(i), float(i % 7), 1.0, 0.0]} for i in ids], schema)

    def put(endpoint: str, t: pa.Table) -> None:
        c.put(endpoint, t)
        state.update((r["id"], r) for r in t.to_pylist())

    def expected() -> pa.Table:
        return table(state.values(), schema)

    for k in range(20):
        put("items", batch(range(k * 30, k * 30 + 30), "a"))
    ds = lance.dataset(str(path))
    ds.create_scalar_index("id", "BTREE")
    ds.create_index("vec", "IVF_FLAT", num_partitions=2, metric="l2")
    for k in range(20, 60):
        put("items", batch(range(k * 30, k * 30 + 30), "a"))
    put("up", batch(range(5, 1800, 9), "u"))  # deletion files, indexed fragments too
    lance.dataset(str(path)).delete("id % 13 = 0")
    state = {i: r for i, r in state.items() if i % 13 != 0}
    before = lance.dataset(str(path))
    indexed = {f.fragment_id for f in before.get_fragments()} & set(range(20))

    res = c.action("optimize", endpoint="items")
    after = lance.dataset(str(path))
    frags = {f.fragment_id for f in after.get_fragments()}
    print(f"lance optimize: {len(before.get_fragments())} -> {len(frags)} fragments: {res}")
    assert res["endpoint"] == "items" and res["version"] == after.version == before.version + 1, res
    assert res["files_removed"] >= 40 and 1 <= res["files_added"] < 5 and res["rows"] > 0, res
    assert indexed <= frags, f"indexed fragments {sorted(indexed - frags)} were rewritten"
    assert len(frags) <= len(indexed) + res["files_added"], f"fragments after optimize: {sorted(frags)}"
    assert_rows(after.to_table(), expected(), "pylance after optimize")
    assert_rows(lance.dataset(str(path), version=before.version).to_table(), expected(), "pylance at the version before")
    assert [v["version"] for v in after.versions()][-2:] == [before.version, after.version]
    assert {i.name for i in after.describe_indices()} == {i.name for i in before.describe_indices()}

    tbl = lancedb.connect(str(db)).open_table("items")
    assert_rows(tbl.to_arrow(), expected(), "LanceDB after optimize")
    for i in (40, 41, 600 + 41, 1700):  # indexed, updated in an indexed fragment, compacted, compacted
        got = tbl.search().where(f"id = {i}").to_arrow()
        assert got.to_pylist() == [state[i]], f"LanceDB scalar query id = {i}: {got.to_pylist()}"
        hit = tbl.search([float(i), float(i % 7), 1.0, 0.0]).limit(1).to_arrow().drop_columns(["_distance"])
        assert hit.to_pylist() == [state[i]], f"LanceDB vector query near {i}: {hit.to_pylist()}"

    # Writes go on: pylance's, then Quiver's over pylance's compaction.
    lance.write_dataset(batch(range(9000, 9010), "p"), str(path), mode="append")
    state.update((r["id"], r) for r in batch(range(9000, 9010), "p").to_pylist())
    m = batch([1, 2, 9000, 9500], "m")
    lance.dataset(str(path)).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(m)
    state.update((r["id"], r) for r in m.to_pylist())
    lance.dataset(str(path)).optimize.compact_files()
    put("up", batch([3, 9001, 9600], "q"))
    put("items", batch(range(9700, 9705), "r"))
    res = c.action("optimize", endpoint="items")
    assert res["files_removed"] >= 2, res
    assert_rows(lance.dataset(str(path)).to_table(), expected(), "pylance after pylance's and Quiver's writes and compactions")
    srv.stop()


def test_lance_optimize_kill_9(serve: Callable[..., Quiver], tmp_path: Path) -> None:
    """Lance: kill -9 once optimize has started writing: pylance reads
    exactly the rows written (the version before, or the Rewrite if it
    landed); after the restart optimize completes, vacuum runs (the killed
    run's files, never referenced, wait a week for it) and writes go on,
    with no row lost or duplicated."""
    import lance

    path = tmp_path / "items.lance"
    workdir = tmp_path / "server"
    eps = [{"name": "items", "sink": "lance", "lance": {"dataset_uri": "file://" + str(path)}, "maintenance": MAINTENANCE}]
    srv = serve(eps, workdir=workdir)
    c = srv.client()
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    sent = [table([{"id": k * 2000 + i, "name": f"n{i}"} for i in range(2000)], schema) for k in range(60)]
    for t in sent:
        c.put("items", t)
    expected = pa.concat_tables(sent)
    files = lambda: set((path / "data").iterdir())  # noqa: E731
    live = files()

    failed = kill_during(srv, "optimize", lambda: files() != live, endpoint="items")
    print(f"kill -9 {'during' if failed else 'after'} the Lance optimize")
    assert_rows(lance.dataset(str(path)).to_table(), expected, "pylance after kill -9 during optimize")

    srv = serve(eps, workdir=workdir)
    c = srv.client()
    c.action("optimize", endpoint="items")
    assert len(lance.dataset(str(path)).get_fragments()) == 1
    c.action("vacuum", endpoint="items", retention_hours=0)
    more = table([{"id": -1, "name": "after"}], schema)
    c.put("items", more)
    assert_rows(lance.dataset(str(path)).to_table(), pa.concat_tables([expected, more]), "pylance after optimize and vacuum following kill -9")
    srv.stop()
