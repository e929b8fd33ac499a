"""Schema features of tables Spark creates, which Quiver writes into.

Column mapping: Spark creates tables in name and id mode, renames and
drops columns; Quiver appends (adding a column), upserts (with deletion
vectors in name mode, copy-on-write in id mode) and commits a transaction
precommitted before a kill -9, after a restart; Spark and delta-rs read
exactly the expected rows, Spark's history and detail load, and Spark
keeps writing.

Type widening: Spark widens INT to BIGINT and FLOAT to DOUBLE after its
first files; Quiver upserts (rewriting old-typed files) and appends in the
widened types; Spark reads the rows (delta-rs 1.6.6 refuses the
typeWidening feature).

CHECK constraints: Spark adds constraints of every supported kind; Quiver
writes rows that pass and refuses, publishing nothing, rows that do not."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pytest
from pyarrow import flight

from data import apply_changelog, changelog_schema, table
from helpers import DeltaRs, Quiver, Spark, Written, assert_rows, check_table, log_actions

# The table's logical schema after Spark's renames and drops, and with the
# column Quiver's append adds.
SCHEMA = pa.schema([("id", pa.int64()), ("label", pa.string()), ("amount", pa.float64()), ("part", pa.string())])
WIDE = SCHEMA.append(pa.field("extra", pa.int64()))


def rows(ids: range, tag: str, extra: bool = False) -> list[dict[str, Any]]:
    out = [{"id": i, "label": f"{tag}-{i}", "amount": i / 4, "part": f"p{i % 3}"} for i in ids]
    if extra:
        for r in out:
            r["extra"] = r["id"] * 10
    return out


def keyed(rs: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {(r["id"],): {**r, "extra": r.get("extra")} for r in rs}


@pytest.fixture(scope="module", params=["name", "id"])
def mapped(request: pytest.FixtureRequest, serve: Callable[..., Quiver], tmp_path_factory: pytest.TempPathFactory,
           spark_session: Any) -> Written:
    mode = request.param
    dv = mode == "name"
    tmp = tmp_path_factory.mktemp(f"mapped-{mode}")
    path = tmp / "table"
    s = spark_session
    s.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, `Name With Space` STRING, amount DOUBLE, junk STRING, part STRING) "
          f"USING delta PARTITIONED BY (part) TBLPROPERTIES ('delta.columnMapping.mode' = '{mode}', "
          f"'delta.enableDeletionVectors' = '{str(dv).lower()}')")
    state = keyed(rows(range(100), "spark"))
    s.createDataFrame([{**r, "Name With Space": r["label"], "junk": "x"} for r in rows(range(100), "spark")]) \
        .select("id", "Name With Space", "amount", "junk", "part").write.format("delta").mode("append").save(str(path))
    s.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN `Name With Space` TO label")
    s.sql(f"ALTER TABLE delta.`{path}` DROP COLUMN junk")

    workdir = tmp / "server"
    uri = "file://" + str(path)
    eps = [{"name": "append", "sink": "delta", "delta": {"table_uri": uri, "partition_by": ["part"], "schema_evolution": "add_columns"}},
           {"name": "upsert", "sink": "delta", "delta": {"table_uri": uri, "partition_by": ["part"], "mode": "upsert", "merge_keys": ["id"],
                                                         "deletion_vectors": dv}}]
    srv = serve(eps, workdir=workdir)
    c = srv.client()
    versions = []
    appended = table(rows(range(1000, 1100), "quiver", extra=True), WIDE)
    versions.append(c.put("append", appended)["version"])
    apply_changelog(state, appended, ["id"])
    # An upsert without extra: updated rows keep theirs, inserted ones get null.
    changes = [{**r, "label": f"up-{r['id']}", "_op": "U"} for r in rows([*range(0, 100, 7), 1001, 1050], "x")]
    changes += [{"id": i, "label": None, "amount": None, "part": None, "_op": "D"} for i in (3, 1002)]
    changes += [{**r, "_op": "I"} for r in rows(range(2000, 2010), "new")]
    cl = table(changes, changelog_schema(SCHEMA))
    versions.append(c.put("upsert", cl)["version"])
    for ch in cl.to_pylist():
        key = (ch["id"],)
        if ch.pop("_op") == "D":
            state.pop(key, None)
        else:
            state[key] = {**ch, "extra": state.get(key, {}).get("extra")}

    # A transaction precommitted, the server killed, restarted on its
    # journal, the commit sent again with the descriptors.
    txn = table(rows(range(3000, 3020), "txn", extra=True), WIDE)
    assert c.action("begin", writer="job", epoch=1)["state"] == "open"
    assert c.put_txn("append", "job", 1, txn).get("staged") is True
    pre = c.action("precommit", writer="job", epoch=1)
    assert pre["state"] == "precommitted", pre
    descriptors: dict[str, list[str]] = {}
    for p in pre["participants"]:
        descriptors.setdefault(p["endpoint"], []).append(p["descriptor"])
    srv.kill()
    srv = serve(eps, workdir=workdir)
    c = srv.client()
    done = c.action("commit", writer="job", epoch=1, descriptors=descriptors)
    assert done["state"] == "committed", done
    versions.append(done["endpoints"]["append"]["version"])
    again = c.action("commit", writer="job", epoch=1, descriptors=descriptors)
    assert again["state"] == "committed" and again["endpoints"]["append"]["version"] == versions[-1], again
    apply_changelog(state, txn, ["id"])
    srv.stop()

    # Spark gave the columns ids 1-5 (junk's 4 is not reused); extra is 6.
    schema = next(m["schemaString"] for m in reversed(log_actions(path, "metaData")))
    assert '"name":"extra"' in schema and '"delta.columnMapping.id":6' in schema, schema
    conf = log_actions(path, "metaData")[-1]["configuration"]
    assert conf["delta.columnMapping.maxColumnId"] == "6", conf
    for add in log_actions(path, "add"):
        assert "part" not in add["partitionValues"], f"partitionValues keyed by a logical name: {add}"
        assert '"id"' not in add["stats"] and '"label"' not in add["stats"], f"stats keyed by a logical name: {add['stats']}"
    if dv:
        assert any(a.get("deletionVector") for a in log_actions(path, "add")), "the upsert marked no rows"
    return Written(path, table(state.values(), WIDE), versions)


def test_column_mapping_spark(mapped: Written, spark_session: Any) -> None:
    spark = Spark(spark_session)
    check_table(spark, mapped)
    # Spark keeps writing: an INSERT, then the rows read back.
    spark_session.sql(f"INSERT INTO delta.`{mapped.path}` (id, label, amount, part, extra) VALUES (9000, 'spark', 1.0, 'p0', 1)")
    more = table([{"id": 9000, "label": "spark", "amount": 1.0, "part": "p0", "extra": 1}], WIDE)
    assert_rows(spark.rows(mapped.path), pa.concat_tables([mapped.expected, more]), "spark after its own insert")
    assert_rows(DeltaRs().rows(mapped.path), pa.concat_tables([mapped.expected, more]), "delta-rs after Spark's insert")


# --- ALTER TABLE while Quiver serves the table --------------------------------

ALTERED = pa.schema([("id", pa.int64()), ("alt", pa.int64()), ("label", pa.string())])


def test_column_mapping_alter_while_serving(serve: Callable[..., Quiver], tmp_path: Path, spark_session: Any) -> None:
    """Spark renames and drops columns of a column-mapped table (name mode,
    row tracking, deletion vectors) while one Quiver server upserts into it
    by id: the key column and another of its type swap names (three RENAME
    COLUMNs) and a column is dropped; then the key column is dropped and
    added again (null in every existing row, which no key matches). Each
    upsert after an ALTER succeeds at its first attempt, through a server
    whose snapshot and key index predate the ALTER; Spark reads exactly
    the expected rows, `_metadata.row_id` unique."""
    path = tmp_path / "table"
    s = spark_session
    s.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, alt BIGINT, label STRING, junk STRING) USING delta "
          "TBLPROPERTIES ('delta.columnMapping.mode' = 'name', 'delta.enableRowTracking' = 'true', "
          "'delta.enableDeletionVectors' = 'true')")
    seed = [{"id": i, "alt": 1000 + i, "label": f"spark-{i}"} for i in range(100)]
    s.createDataFrame([{**r, "junk": "x"} for r in seed]).select("id", "alt", "label", "junk") \
        .repartition(2).write.format("delta").mode("append").save(str(path))
    state = {r["id"]: r for r in seed}
    srv = serve([{"name": "upsert", "sink": "delta", "delta": {"table_uri": "file://" + str(path), "mode": "upsert",
                                                               "merge_keys": ["id"], "deletion_vectors": True}}])
    c = srv.client()

    def upsert(changes: list[dict[str, Any]]) -> None:
        # put, not put_retrying: an Aborted first attempt fails the test.
        cl = table(changes, changelog_schema(ALTERED))
        c.put("upsert", cl)
        for ch in cl.to_pylist():
            if ch.pop("_op") == "D":
                state.pop(ch["id"], None)
            else:
                state[ch["id"]] = ch

    def spark_reads(nulls: list[dict[str, Any]], step: str) -> None:
        got = s.read.format("delta").load(str(path))
        assert_rows(got.select("id", "alt", "label").toArrow(), table([*nulls, *state.values()], ALTERED), f"spark after {step}")
        ids = [r[0] for r in got.select("_metadata.row_id").collect()]
        assert None not in ids and len(set(ids)) == len(ids), f"{step}: row ids are not unique"

    # Before any ALTER: the server reads the table and indexes the keys.
    upsert([{"id": i, "alt": 2000 + i, "label": f"q1-{i}", "_op": "U"} for i in [*range(0, 10), 200, 201]])
    spark_reads([], "the first upsert")

    s.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN id TO tmp")
    s.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN alt TO id")
    s.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN tmp TO alt")
    s.sql(f"ALTER TABLE delta.`{path}` DROP COLUMN junk")
    state = {r["alt"]: {"id": r["alt"], "alt": r["id"], "label": r["label"]} for r in state.values()}
    # 1050 and 2000 are ids now (Spark's row 50, Quiver's updated row 0);
    # 5 and 200 are not any more (alts now): inserted.
    upsert([{"id": i, "alt": -i, "label": f"q2-{i}", "_op": "U"} for i in (1050, 2000, 5, 200)]
           + [{"id": 1010, "alt": None, "label": None, "_op": "D"}])
    spark_reads([], "the swap and the drop")

    s.sql(f"ALTER TABLE delta.`{path}` DROP COLUMN id")
    s.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (id BIGINT)")
    nulls = [{**r, "id": None} for r in state.values()]
    state = {}
    upsert([{"id": i, "alt": -i, "label": f"q3-{i}", "_op": "U"} for i in (1050, 2000, 7000)])
    spark_reads(nulls, "the key column dropped and added again")
    srv.stop()


# --- type widening ----------------------------------------------------------

NARROW = pa.schema([("id", pa.int32()), ("v", pa.float32()), ("s", pa.string())])
WIDENED = pa.schema([("id", pa.int64()), ("v", pa.float64()), ("s", pa.string())])


@pytest.fixture(scope="module")
def widened(serve: Callable[..., Quiver], tmp_path_factory: pytest.TempPathFactory, spark_session: Any) -> Written:
    tmp = tmp_path_factory.mktemp("widened")
    path = tmp / "table"
    s = spark_session
    s.sql(f"CREATE TABLE delta.`{path}` (id INT, v FLOAT, s STRING) USING delta "
          "TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    first = [{"id": i, "v": i / 2, "s": f"spark-{i}"} for i in range(50)]
    s.createDataFrame(table(first, NARROW)).repartition(2).write.format("delta").mode("append").save(str(path))
    s.sql(f"ALTER TABLE delta.`{path}` ALTER COLUMN id TYPE BIGINT")
    s.sql(f"ALTER TABLE delta.`{path}` ALTER COLUMN v TYPE DOUBLE")
    state = {(r["id"],): r for r in first}

    uri = "file://" + str(path)
    srv = serve([{"name": "append", "sink": "delta", "delta": {"table_uri": uri}},
                 {"name": "upsert", "sink": "delta", "delta": {"table_uri": uri, "mode": "upsert", "merge_keys": ["id"]}}])
    c = srv.client()
    versions = []
    big = table([{"id": 2**40 + i, "v": 1e300, "s": "quiver"} for i in range(5)], WIDENED)
    versions.append(c.put("append", big)["version"])
    apply_changelog(state, big, ["id"])
    changes = [{"id": i, "v": 0.1, "s": "up", "_op": "U"} for i in (3, 10, 2**40)]
    changes += [{"id": 4, "v": None, "s": None, "_op": "D"}, {"id": 2**41, "v": 2.5, "s": "new", "_op": "I"}]
    cl = table(changes, changelog_schema(WIDENED))
    versions.append(c.put("upsert", cl)["version"])
    apply_changelog(state, cl, ["id"])
    srv.stop()
    assert any("delta.typeChanges" in m["schemaString"] for m in log_actions(path, "metaData"))
    return Written(path, table(state.values(), WIDENED), versions)


def test_type_widening_spark(widened: Written, spark_session: Any) -> None:
    spark = Spark(spark_session)
    check_table(spark, widened)
    spark_session.sql(f"INSERT INTO delta.`{widened.path}` VALUES (9000, 1.5, 'spark')")
    more = table([{"id": 9000, "v": 1.5, "s": "spark"}], WIDENED)
    assert_rows(spark.rows(widened.path), pa.concat_tables([widened.expected, more]), "spark after its own insert")


# --- identity columns ---------------------------------------------------------

KV = pa.schema([("k", pa.string()), ("v", pa.int64())])


def test_identity_columns(serve: Callable[..., Quiver], tmp_path: Path, spark_session: Any) -> None:
    """Spark creates `id BIGINT GENERATED ALWAYS AS IDENTITY` and inserts;
    Quiver appends and upserts by k without id (a stream carrying id is
    refused); Spark reads unique ids, the updated row keeps its id, and its
    own INSERT afterwards gets an id above Quiver's; delta-rs reads it."""
    path = tmp_path / "table"
    s = spark_session
    s.sql(f"CREATE TABLE delta.`{path}` (id BIGINT GENERATED ALWAYS AS IDENTITY, k STRING, v BIGINT) USING delta")
    s.sql(f"INSERT INTO delta.`{path}` (k, v) VALUES ('a', 1), ('b', 2)")
    uri = "file://" + str(path)
    srv = serve([{"name": "append", "sink": "delta", "delta": {"table_uri": uri}},
                 {"name": "upsert", "sink": "delta", "delta": {"table_uri": uri, "mode": "upsert", "merge_keys": ["k"]}}])
    c = srv.client()
    with pytest.raises(pa.ArrowInvalid, match="GENERATED ALWAYS AS IDENTITY"):
        c.put("append", table([{"id": 7, "k": "x", "v": 0}], pa.schema([("id", pa.int64()), *KV])))
    c.put("append", table([{"k": f"q{i}", "v": i} for i in range(5)], KV))
    c.put("upsert", table([{"k": "a", "v": 100, "_op": "U"}, {"k": "new", "v": 5, "_op": "I"}], changelog_schema(KV)))
    srv.stop()

    before = {r.k: r.id for r in s.sql(f"SELECT k, id FROM delta.`{path}` VERSION AS OF 1").collect()}
    s.sql(f"INSERT INTO delta.`{path}` (k, v) VALUES ('spark', 9)")
    rows = {r.k: (r.id, r.v) for r in s.read.format("delta").load(str(path)).collect()}
    ids = [i for i, _ in rows.values()]
    assert len(set(ids)) == len(ids) == 9 and None not in ids, rows
    assert rows["a"] == (before["a"], 100), "the updated row keeps its id"
    assert rows["b"] == (before["b"], 2)
    assert rows["spark"][0] > max(i for k, (i, _) in rows.items() if k != "spark"), "Spark continues after Quiver's values"
    check_table(Spark(s), Written(path, table([{"id": i, "k": k, "v": v} for k, (i, v) in rows.items()],
                                              pa.schema([("id", pa.int64()), *KV]))), last_writer_quiver=False)
    assert_rows(DeltaRs().rows(path), table([{"id": i, "k": k, "v": v} for k, (i, v) in rows.items()],
                                            pa.schema([("id", pa.int64()), *KV])), "delta-rs")


# --- CHECK constraints ----------------------------------------------------------

ORDERS = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("price", pa.decimal128(10, 2)),
                    ("ratio", pa.float64()), ("day", pa.date32()), ("status", pa.string())])


def order(i: int, **change: Any) -> dict[str, Any]:
    return {"id": i, "name": f"n{i}", "price": Decimal(i) / 4, "ratio": 0.25, "day": dt.date(2024, 1, 1 + i % 28),
            "status": "paid", **change}


def test_check_constraints(serve: Callable[..., Quiver], tmp_path: Path, spark_session: Any) -> None:
    """Spark creates a column-mapped table (a renamed column) and adds CHECK
    constraints of each supported kind; Spark itself refuses a NULL where a
    constraint needs a value (NULL violates). Quiver appends and upserts
    rows that pass, which Spark reads; a batch or upsert with a violating
    row (false or NULL) is refused with InvalidArgument naming the
    constraint, publishing nothing; Spark keeps writing afterwards. The
    column id is NOT NULL: streams declare it non-nullable, and one
    declaring it nullable is refused; a constraint outside the subset makes the endpoint
    refuse writes, naming it."""
    path = tmp_path / "table"
    s = spark_session
    s.sql(f"CREATE TABLE delta.`{path}` (id BIGINT NOT NULL, `Full Name` STRING, price DECIMAL(10,2), ratio DOUBLE, day DATE, "
          "status STRING) USING delta TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    s.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN `Full Name` TO name")
    s.createDataFrame(table([order(i) for i in range(1, 4)], ORDERS)).write.format("delta").mode("append").save(str(path))
    for name, check in [("id_positive", "id > 0"),
                        ("price_range", "price BETWEEN 0 AND 1000.50"),
                        ("status_known", "status IN ('new', 'paid', 'shipped')"),
                        ("name_set", "name IS NOT NULL AND name <> ''"),
                        ("recent_or_low", "day >= DATE '2024-01-01' OR ratio < 0.5")]:
        s.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT {name} CHECK ({check})")
    # NULL IN (…) is NULL, which Spark refuses as it refuses FALSE.
    with pytest.raises(Exception, match="(?i)status_known"):
        s.sql(f"INSERT INTO delta.`{path}` VALUES (50, 'x', 1.00, 0.1, DATE '2024-02-01', NULL)")
    s.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT not_cancelled CHECK (NOT (status = 'cancelled'))")
    expected = [order(i) for i in range(1, 4)]

    uri = "file://" + str(path)
    srv = serve([{"name": "append", "sink": "delta", "delta": {"table_uri": uri}},
                 {"name": "upsert", "sink": "delta", "delta": {"table_uri": uri, "mode": "upsert", "merge_keys": ["id"]}}])
    c = srv.client()
    good = [order(i) for i in range(10, 20)] + [order(20, day=dt.date(2020, 1, 1), ratio=0.1, price=Decimal("1000.50"))]
    versions = [c.put("append", table(good, ORDERS))["version"]]
    expected += good
    before = len(log_actions(path, "commitInfo"))
    for bad, constraint in [(order(30, id=-1), "id_positive"),
                            (order(31, price=Decimal("1000.51")), "price_range"),
                            (order(32, status="lost"), "status_known"),
                            (order(33, status=None), "not_cancelled"),  # the first by name of the two it breaks
                            (order(34, name=""), "name_set"),
                            (order(35, name=None), "name_set"),
                            (order(36, day=dt.date(2023, 12, 31), ratio=0.5), "recent_or_low"),
                            (order(37, status="cancelled"), "not_cancelled")]:
        with pytest.raises(pa.ArrowInvalid, match=f"CHECK constraint {constraint} .*violated"):
            c.put("append", table([order(40), bad], ORDERS))
    changes = [{**order(10, status="shipped"), "_op": "U"}, {**order(50), "_op": "I"}]
    versions.append(c.put("upsert", table(changes, changelog_schema(ORDERS)))["version"])
    expected = [r for r in expected if r["id"] != 10] + [order(10, status="shipped"), order(50)]
    with pytest.raises(pa.ArrowInvalid, match="CHECK constraint price_range .*price=-1.00"):
        c.put("upsert", table([{**order(11, price=Decimal(-1)), "_op": "U"}], changelog_schema(ORDERS)))
    srv.stop()
    assert len(log_actions(path, "commitInfo")) == before + 1, "a refused batch or upsert published something"

    spark = Spark(s)
    check_table(spark, Written(path, table(expected, ORDERS), versions))
    s.sql(f"INSERT INTO delta.`{path}` VALUES (60, 'spark', 2.00, 0.9, DATE '2024-03-01', 'new')")
    expected.append({"id": 60, "name": "spark", "price": Decimal(2), "ratio": 0.9, "day": dt.date(2024, 3, 1), "status": "new"})
    assert_rows(spark.rows(path), table(expected, ORDERS), "spark after its own insert")

    # NOT NULL (no expression): a stream must declare the column non-nullable.
    loose = pa.schema([ORDERS.field("id").with_nullable(True), *list(ORDERS)[1:]])
    srv = serve([{"name": "append", "sink": "delta", "delta": {"table_uri": uri}}])
    with pytest.raises(pa.ArrowInvalid, match=r'column "id" is nullable, the table\'s is not'):
        srv.client().put("append", table([order(61)], loose))
    srv.stop()
    assert_rows(spark.rows(path), table(expected, ORDERS), "spark after the refused nullable stream")

    # A constraint outside the subset: the endpoint refuses writes, naming it.
    s.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT name_len CHECK (length(name) > 0)")
    # (Another endpoint keeps the server ready.)
    srv = serve([{"name": "append", "sink": "delta", "delta": {"table_uri": uri}},
                 {"name": "other", "sink": "delta", "delta": {"table_uri": "file://" + str(tmp_path / "other")}}])
    with pytest.raises((flight.FlightError, pa.ArrowException), match=r"constraint name_len .*function length"):
        srv.client().put("append", table([order(70)], ORDERS))
    srv.stop()
    assert_rows(spark.rows(path), table(expected, ORDERS), "spark after the refused endpoint")
