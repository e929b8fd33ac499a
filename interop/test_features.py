"""Every way Quiver writes Delta, read back by delta-rs and by Spark: each
fixture writes a table through one server of the module (Flight DoPut,
auto-commit or transactions), each test reads it with one reader."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data import T0, UTC, apply_changelog, changelog_schema, table, typed
from helpers import Quiver, Reader, Written, check_table, log_actions, readers

# The module's endpoints: name → delta section (table_uri added below).
ENDPOINTS: dict[str, dict[str, Any]] = {
    # zstd (the codec of the quickstart's and the benchmarks' endpoints) on
    # every type; the other endpoints keep the default, snappy
    "typed": {"mode": "append", "parquet": {"compression": "zstd"}},
    # the same types with integers, dates and timestamps DELTA_BINARY_PACKED
    "typed_delta_ints": {"mode": "append", "parquet": {"compression": "zstd", "integer_encoding": "delta_binary_packed"}},
    "part_date": {"partition_by": ["p"]},
    "part_timestamp": {"partition_by": ["p"]},
    "part_int": {"partition_by": ["p"]},
    "part_string": {"partition_by": ["p"]},
    "part_two": {"partition_by": ["p", "q"]},
    "part_float": {"partition_by": ["p"]},
    "overwrite": {"mode": "overwrite", "partition_by": ["p"], "checkpoint_interval": 2},
    "overwrite_flat": {"mode": "overwrite", "checkpoint_interval": 2},
    "evolve": {"schema_evolution": "add_columns"},
    "evolve_ntz": {"schema_evolution": "add_columns"},
    "evolve_old": {"schema_evolution": "add_columns"},
    "evolve_old_upsert": {"mode": "upsert", "merge_keys": ["id"], "schema_evolution": "add_columns"},
    "ntz": {},
    "upsert_cow": {"mode": "upsert", "merge_keys": ["id"]},
    "upsert_dv": {"mode": "upsert", "merge_keys": ["id"], "deletion_vectors": True, "partition_by": ["region"]},
    "txn_append": {},
    "txn_upsert": {"mode": "upsert", "merge_keys": ["id"]},
    "checkpoints": {"mode": "upsert", "merge_keys": ["id"], "deletion_vectors": True,
                    "partition_by": ["p"], "checkpoint_interval": 2},
    "strings": {"parquet": {"compression": "snappy"}},
    "wide": {},
}


@pytest.fixture(scope="module")
def server(quiver: Any, tables: Any) -> Quiver:
    return quiver(*[(name, {**cfg, "table_uri": tables / name}) for name, cfg in ENDPOINTS.items()])


def written(server: Quiver, endpoint: str, sent: list[pa.Table], chunk: int | None = None) -> Written:
    """Sends each table as one auto-commit stream; the table must then hold
    every row sent."""
    acks = [server.client().put(endpoint, t, chunk) for t in sent]
    expected = pa.concat_tables(sent, promote_options="default")  # missing columns read as null
    return Written(server.table_path(endpoint), expected, [a["version"] for a in acks])


# --- append: every type ------------------------------------------------------


@pytest.fixture(scope="module")
def typed_table(server: Quiver) -> Written:
    """Three streams, the second one in 64-row batches."""
    sent = [(typed(0, 500), None), (typed(500, 700), 64), (typed(1200, 1), None)]
    versions = [server.client().put("typed", t, chunk)["version"] for t, chunk in sent]
    assert versions == [0, 1, 2]
    return Written(server.table_path("typed"), pa.concat_tables([t for t, _ in sent]), versions)


@pytest.mark.parametrize("reader_name", readers())
def test_append_every_type(typed_table: Written, reader: Reader) -> None:
    check_table(reader, typed_table)


@pytest.fixture(scope="module")
def typed_delta_ints(server: Quiver) -> Written:
    """Every type again, with parquet.integer_encoding: delta_binary_packed;
    its integer columns are DELTA_BINARY_PACKED in the data files."""
    w = written(server, "typed_delta_ints", [typed(0, 500), typed(500, 700)], 64)
    encodings = set()
    for f in w.path.rglob("*.parquet"):
        md = pq.ParquetFile(f).metadata
        for rg in range(md.num_row_groups):
            for c in range(md.num_columns):
                col = md.row_group(rg).column(c)
                if col.physical_type in ("INT32", "INT64"):
                    encodings.update(col.encodings)
    assert "DELTA_BINARY_PACKED" in encodings, encodings
    return w


@pytest.mark.parametrize("reader_name", readers())
def test_append_every_type_delta_integers(typed_delta_ints: Written, reader: Reader) -> None:
    check_table(reader, typed_delta_ints)


# --- partitions ------------------------------------------------------------

PARTITION_VALUES: dict[str, tuple[pa.DataType, list[Any]]] = {
    "part_date": (pa.date32(), [dt.date(2026, 1, 1), dt.date(1970, 1, 1), dt.date(1, 1, 1), None]),
    "part_timestamp": (pa.timestamp("us", tz="UTC"),
                       [T0, dt.datetime(1970, 1, 1, tzinfo=UTC), T0 + dt.timedelta(microseconds=123456), None]),
    "part_int": (pa.int64(), [0, -1, 2**40, None]),
    # The empty string is a null partition value in Delta (as in Spark).
    "part_string": (pa.string(), ["plain", "with space", "a/b", "k=v", "50%", "%25", "a:b", "#?*[]^{}\\'\"",
                                  "ünïcødé", "日本語", "__HIVE_DEFAULT_PARTITION__x", " lead", "trail ", "", None]),
    "part_float": (pa.float64(), [1.5, -0.0, 1e20, 1e-7, float("inf"), float("-inf"), float("nan"), None]),
}


def partitioned(endpoint: str, server: Quiver) -> Written:
    typ, values = PARTITION_VALUES[endpoint]
    schema = pa.schema([("id", pa.int64()), ("p", typ), ("v", pa.string())])
    rows = [{"id": i, "p": values[i % len(values)], "v": f"v{i}"} for i in range(3 * len(values))]
    w = written(server, endpoint, [table(rows[: len(rows) // 2], schema), table(rows[len(rows) // 2:], schema)])
    for r in rows:
        if r["p"] == "":
            r["p"] = None
    w.expected = table(rows, schema)
    return w


@pytest.fixture(scope="module")
def partition_tables(server: Quiver) -> dict[str, Written]:
    out = {e: partitioned(e, server) for e in PARTITION_VALUES}
    schema = pa.schema([("id", pa.int64()), ("p", pa.date32()), ("q", pa.string()), ("v", pa.int32())])
    rows = [{"id": i, "p": [dt.date(2026, 3, 1), None][i % 2], "q": ["x y", "a=b/c", None][i % 3], "v": i}
            for i in range(30)]
    out["part_two"] = written(server, "part_two", [table(rows, schema)])
    return out


@pytest.mark.parametrize("reader_name", readers())
@pytest.mark.parametrize("endpoint", ["part_date", "part_timestamp", "part_int", "part_string", "part_two"])
def test_partitions(partition_tables: dict[str, Written], endpoint: str, reader: Reader) -> None:
    check_table(reader, partition_tables[endpoint])


@pytest.mark.parametrize("reader_name", readers())
def test_float_partitions(partition_tables: dict[str, Written], reader: Reader) -> None:
    check_table(reader, partition_tables["part_float"])


# Java's Double.parseDouble grammar (without hexadecimal): what Java readers
# (Spark, delta-kernel) parse float partition values with.
JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?))[fFdD]?")


def test_float_partition_values_parse_in_java(partition_tables: dict[str, Written]) -> None:
    """Float partition values are spelled so that Java parses them back to
    the value sent (Infinity, not Go's +Inf, which Quiver wrote before
    a1dac11; Spark 4.2's cast happens to accept both)."""
    sent = {str(v) for v in PARTITION_VALUES["part_float"][1] if v is not None}
    values = {a["partitionValues"]["p"] for a in log_actions(partition_tables["part_float"].path, "add")}
    assert None in values
    values.discard(None)
    bad = sorted(v for v in values if not JAVA_DOUBLE.fullmatch(v))
    assert not bad, f"partition values Java cannot parse: {bad}"
    assert {str(float(v)) for v in values} == sent


def test_partition_directories(partition_tables: dict[str, Written]) -> None:
    """Hive-escaped directories; add.path is that path URI-encoded again;
    partitionValues hold the values (null for null and the empty string)."""
    w = partition_tables["part_string"]
    adds = log_actions(w.path, "add")
    values = {a["partitionValues"]["p"] for a in adds}
    assert values == {v or None for v in PARTITION_VALUES["part_string"][1]}
    for a in adds:
        local = w.path / unquote(a["path"])
        assert local.is_file(), a["path"]
        if a["partitionValues"]["p"] is None:
            assert local.parent.name == "p=__HIVE_DEFAULT_PARTITION__"
    assert (w.path / "p=a%2Fb").is_dir() and (w.path / "p=k%3Dv").is_dir() and (w.path / "p=50%25").is_dir()


# --- overwrite -------------------------------------------------------------


@pytest.fixture(scope="module")
def overwritten(server: Quiver) -> dict[str, Written]:
    """Five overwrites of a partitioned and of an unpartitioned table
    (checkpoint_interval 2: checkpoints at 2 and 4 hold removes)."""
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    out = {}
    for endpoint in ("overwrite", "overwrite_flat"):
        versions = []
        for round_ in range(5):
            t = table(({"id": round_ * 100 + i, "p": f"r{round_}-{i % 3}"} for i in range(20)), schema)
            versions.append(server.client().put(endpoint, t)["version"])
        assert versions == [0, 1, 2, 3, 4]
        out[endpoint] = Written(server.table_path(endpoint), t, versions)
    return out


@pytest.mark.parametrize("reader_name", readers())
@pytest.mark.parametrize("endpoint", ["overwrite", "overwrite_flat"])
def test_overwrite(overwritten: dict[str, Written], endpoint: str, reader: Reader) -> None:
    check_table(reader, overwritten[endpoint])


@pytest.mark.parametrize("endpoint", ["overwrite", "overwrite_flat"])
def test_overwrite_removes_carry_partition_values(overwritten: dict[str, Written], endpoint: str) -> None:
    """Every remove states the partition values of the file it removes ({}
    when the table is unpartitioned), in commits and in checkpoints, as
    the protocol says of removes with extendedFileMetadata (unpartitioned
    tables had none before 8bb0782)."""
    w = overwritten[endpoint]
    adds = {a["path"]: a for a in log_actions(w.path, "add")}
    removes = log_actions(w.path, "remove")
    assert removes and all(r.get("extendedFileMetadata") for r in removes)
    for r in removes:
        assert r.get("partitionValues") == adds[r["path"]]["partitionValues"], r
    checkpoint = pq.read_table(w.path / "_delta_log" / f"{4:020d}.checkpoint.parquet")
    in_checkpoint = [r for r in checkpoint.column("remove").to_pylist() if r is not None]
    assert in_checkpoint
    for r in in_checkpoint:
        assert r["partitionValues"] is not None and dict(r["partitionValues"]) == adds[r["path"]]["partitionValues"], r


# --- schema evolution (add_columns) -------------------------------------------


@pytest.fixture(scope="module")
def evolved(server: Quiver) -> Written:
    v1 = pa.schema([("id", pa.int64()), ("s", pa.string())])
    v2 = v1.append(pa.field("n", pa.int32())).append(pa.field("ts", pa.timestamp("us", tz="UTC")))
    a = table(({"id": i, "s": f"s{i}"} for i in range(10)), v1)
    b = table(({"id": i, "s": None, "n": i, "ts": T0} for i in range(10, 20)), v2)
    w = written(server, "evolve", [a, b])
    w.expected = pa.concat_tables([a, b], promote_options="default")
    return w


@pytest.mark.parametrize("reader_name", readers())
def test_add_columns(evolved: Written, reader: Reader) -> None:
    check_table(reader, evolved)


@pytest.fixture(scope="module")
def evolved_ntz(server: Quiver) -> Written:
    v1 = pa.schema([("id", pa.int64())])
    v2 = v1.append(pa.field("ntz", pa.timestamp("us")))
    a = table(({"id": i} for i in range(5)), v1)
    b = table(({"id": i, "ntz": dt.datetime(2026, 1, 1, 12, 0, i)} for i in range(5, 10)), v2)
    w = written(server, "evolve_ntz", [a, b])
    w.expected = pa.concat_tables([a, b], promote_options="default")
    return w


@pytest.mark.parametrize("reader_name", readers())
def test_add_columns_timestamp_ntz(evolved_ntz: Written, reader: Reader) -> None:
    """A timestamp_ntz column added by add_columns upgrades the protocol to
    3/7 with timestampNtz (before 098c55b both readers refused the table)."""
    check_table(reader, evolved_ntz)


@pytest.fixture(scope="module")
def ntz_table(server: Quiver) -> Written:
    schema = pa.schema([("id", pa.int64()), ("ntz", pa.timestamp("us"))])
    t = table(({"id": i, "ntz": None if i == 3 else dt.datetime(2026, 1, 1) + dt.timedelta(hours=i)}
               for i in range(10)), schema)
    return written(server, "ntz", [t])


@pytest.mark.parametrize("reader_name", readers())
def test_timestamp_ntz_table(ntz_table: Written, reader: Reader) -> None:
    check_table(reader, ntz_table)


@pytest.fixture(scope="module")
def older_clients(server: Quiver) -> dict[str, Written]:
    """After a stream added a column, a client still sending the older
    schema (without it) is accepted, as Delta's schema enforcement allows:
    appended rows read the column as null; an upsert keeps the values of
    updated rows (Delta's MERGE UPDATE SET *) and inserts nulls."""
    v1 = pa.schema([("id", pa.int64()), ("s", pa.string())])
    v2 = v1.append(pa.field("n", pa.int64()))
    c = server.client()
    out = {}
    for endpoint in ("evolve_old", "evolve_old_upsert"):
        sent = [table([{"id": 1, "s": "a"}, {"id": 2, "s": "b"}], v1),
                table([{"id": 2, "s": "b2", "n": 2}, {"id": 3, "s": "c", "n": 3}], v2),
                table([{"id": 3, "s": "c3"}, {"id": 4, "s": "d"}], v1)]
        versions = [c.put(endpoint, t)["version"] for t in sent]
        out[endpoint] = Written(server.table_path(endpoint), pa.concat_tables(sent, promote_options="default"),
                                versions)
    out["evolve_old_upsert"].expected = table([{"id": 1, "s": "a", "n": None}, {"id": 2, "s": "b2", "n": 2},
                                               {"id": 3, "s": "c3", "n": 3}, {"id": 4, "s": "d", "n": None}], v2)
    return out


@pytest.mark.parametrize("reader_name", readers())
@pytest.mark.parametrize("endpoint", ["evolve_old", "evolve_old_upsert"])
def test_add_columns_then_older_client(older_clients: dict[str, Written], endpoint: str, reader: Reader) -> None:
    """(Upserts with the older schema were refused before 29afc2a.)"""
    check_table(reader, older_clients[endpoint])


# --- upsert ------------------------------------------------------------------

UPSERT = pa.schema([("id", pa.int64()), ("region", pa.string()), ("name", pa.string()), ("amount", pa.float64())])


def upserted(server: Quiver, endpoint: str, rounds: int = 3) -> Written:
    """A seed of 3000 rows, then changelogs updating, deleting, inserting
    and moving keys between regions, with a key changed twice in one stream
    (the last change wins)."""
    state: dict[Any, dict[str, Any]] = {}
    versions = []
    regions = ["eu", "us", "ap", None]
    for r in range(rounds):
        if r == 0:
            rows = [{"id": i, "region": regions[i % 4], "name": f"n{i}", "amount": i * 1.5, "_op": "I"}
                    for i in range(3000)]
        else:
            rows = []
            for i in range(0, 3300, 1 + r):
                op = "D" if i % 7 == r else ("I" if i >= 3000 else "U")
                rows.append({"id": i, "region": regions[(i + r) % 4], "name": f"n{i}-r{r}", "amount": -i, "_op": op})
            rows.append({"id": 1, "region": "eu", "name": f"first-{r}", "amount": 0.0, "_op": "U"})
            rows.append({"id": 1, "region": "us", "name": f"last-{r}", "amount": 1.0, "_op": "U"})
        changes = table(rows, changelog_schema(UPSERT))
        versions.append(server.client().put(endpoint, changes, 500)["version"])
        apply_changelog(state, changes, ["id"])
    return Written(server.table_path(endpoint), table(state.values(), UPSERT), versions)


@pytest.fixture(scope="module")
def upsert_cow(server: Quiver) -> Written:
    return upserted(server, "upsert_cow")


@pytest.fixture(scope="module")
def upsert_dv(server: Quiver) -> Written:
    return upserted(server, "upsert_dv")


@pytest.mark.parametrize("reader_name", readers())
def test_upsert_copy_on_write(upsert_cow: Written, reader: Reader) -> None:
    check_table(reader, upsert_cow)
    assert not any("deletionVector" in a for a in log_actions(upsert_cow.path, "add"))


@pytest.mark.parametrize("reader_name", readers())
def test_upsert_deletion_vectors(upsert_dv: Written, reader: Reader) -> None:
    check_table(reader, upsert_dv)
    assert any(a.get("deletionVector") for a in log_actions(upsert_dv.path, "add")), "no deletion vector was written"


# --- transactions ----------------------------------------------------------

WRITER = "interop/pipeline-1"


@pytest.fixture(scope="module")
def transactions(server: Quiver) -> dict[str, Written]:
    """Three epochs, each one transaction over an append and an upsert
    endpoint (CMD descriptors, begin/precommit/commit); then epoch 2 is
    replayed and changes nothing."""
    c = server.client()
    schema = pa.schema([("id", pa.int64()), ("epoch", pa.int64())])
    appended, state, versions = [], {}, {"txn_append": [], "txn_upsert": []}
    for epoch in (1, 2, 3):
        rows = table(({"id": epoch * 100 + i, "epoch": epoch} for i in range(10)), schema)
        ups = table(({"id": i, "epoch": epoch} for i in range(epoch * 3)), schema)
        done = c.txn(WRITER, epoch, [("txn_append", rows), ("txn_upsert", ups)])
        for e in versions:
            versions[e].append(done["endpoints"][e]["version"])
        appended.append(rows)
        apply_changelog(state, ups, ["id"])
    return {
        "txn_append": Written(server.table_path("txn_append"), pa.concat_tables(appended), versions["txn_append"]),
        "txn_upsert": Written(server.table_path("txn_upsert"), table(state.values(), schema), versions["txn_upsert"]),
    }


@pytest.mark.parametrize("reader_name", readers())
@pytest.mark.parametrize("endpoint", ["txn_append", "txn_upsert"])
def test_transactions(transactions: dict[str, Written], endpoint: str, reader: Reader) -> None:
    w = transactions[endpoint]
    assert w.versions == [0, 1, 2]
    check_table(reader, w)


def test_transaction_app_ids(transactions: dict[str, Written], server: Quiver, spark_session: Any) -> None:
    """The writer's epoch is the table's txn version for its app id, as
    delta-rs and Spark's DeltaLog see it; replaying epoch 2 changes nothing."""
    from deltalake import DeltaTable

    c = server.client()
    schema = pa.schema([("id", pa.int64()), ("epoch", pa.int64())])
    ack = c.put_txn("txn_append", WRITER, 2, table([{"id": 1, "epoch": 2}], schema))
    assert ack.get("staged") is True and ack.get("rows") == 0 or ack.get("replayed") is True, ack
    done = c.action("commit", writer=WRITER, epoch=2)
    assert done["state"] == "committed" and done.get("replayed") is True, done
    for w in transactions.values():
        assert DeltaTable(str(w.path)).transaction_version(WRITER) == 3
        assert {t["appId"]: t["version"] for t in log_actions(w.path, "txn")} == {WRITER: 3}
        log = spark_session._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark_session._jsparkSession, str(w.path))
        assert log.update(False, spark_session._jvm.scala.Option.empty(), spark_session._jvm.scala.Option.empty()) \
            .transactions().get(WRITER).get() == 3
        assert DeltaTable(str(w.path)).version() == 2, "the replay committed something"
    assert c.action("committed-epoch", endpoint="txn_append", writer=WRITER)["epoch"] == 3


# --- checkpoints -------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpointed(server: Quiver) -> Written:
    """Seven upserts with deletion vectors on a partitioned table with
    checkpoint_interval 2: checkpoints at 2, 4, 6 holding adds with
    deletion vectors and removes."""
    schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64())])
    state: dict[Any, dict[str, Any]] = {}
    versions = []
    for r in range(7):
        rows = [{"id": i, "p": f"p{i % 3}", "v": r, "_op": "D" if (i + r) % 11 == 0 else "U"}
                for i in range(r * 50, r * 50 + 400, 1 + r % 2)]
        changes = table(rows, changelog_schema(schema))
        versions.append(server.client().put("checkpoints", changes)["version"])
        apply_changelog(state, changes, ["id"])
    return Written(server.table_path("checkpoints"), table(state.values(), schema), versions)


@pytest.mark.parametrize("reader_name", readers())
def test_checkpoints(checkpointed: Written, reader: Reader) -> None:
    log = checkpointed.path / "_delta_log"
    assert checkpointed.versions == list(range(7))
    assert sorted(p.name for p in log.glob("*.checkpoint.parquet")) == [
        f"{v:020d}.checkpoint.parquet" for v in (2, 4, 6)]
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 6
    check_table(reader, checkpointed)


def test_checkpoint_interval_property(checkpointed: Written) -> None:
    from deltalake import DeltaTable

    assert DeltaTable(str(checkpointed.path)).metadata().configuration.get("delta.checkpointInterval") == "2"


# --- long string pages -------------------------------------------------------


@pytest.fixture(scope="module")
def strings(server: Quiver) -> Written:
    """20,000 rows in one stream: long unique strings (too many for a
    dictionary), the first 5000 null, pages over 4096 rows; binary too."""
    n = 20_000
    schema = pa.schema([("id", pa.int64()), ("nulls_first", pa.string()), ("sparse", pa.string()),
                        ("dense", pa.large_string()), ("bin", pa.binary())])
    rows = [{"id": i,
             "nulls_first": None if i < 5000 else f"value-{i:06d}-" + "x" * 60,
             "sparse": f"s{i}-" + "y" * (i % 50) if i % 97 == 0 else None,
             "dense": f"{i}-" + "z" * (i % 70),
             "bin": None if i < 5000 else f"b{i:06d}".encode() * 8} for i in range(n)]
    w = written(server, "strings", [table(rows, schema)])
    w.expected = w.expected.cast(schema.set(3, pa.field("dense", pa.string())))
    return w


@pytest.mark.parametrize("reader_name", readers())
def test_strings_nulls_first_long_pages(strings: Written, reader: Reader) -> None:
    check_table(reader, strings)


def test_strings_are_not_delta_length_byte_array(strings: Written) -> None:
    """String and binary chunks are PLAIN or dictionary encoded, as Spark
    and arrow-rs write them: never DELTA_LENGTH_BYTE_ARRAY, which Spark's
    vectorized reader refuses (<= 3.3) or misreads (SPARK-52240), and which
    Quiver wrote for strings outgrowing their dictionary before 7ae02ed
    (Spark 4.2 happens to read this table right either way)."""
    files = sorted(strings.path.glob("*.parquet"))
    assert files
    for f in files:
        meta = pq.ParquetFile(f).metadata
        for rg in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                col = meta.row_group(rg).column(c)
                assert "DELTA_LENGTH_BYTE_ARRAY" not in col.encodings, (f.name, col.path_in_schema, col.encodings)


# --- statistics ---------------------------------------------------------------


@pytest.fixture(scope="module")
def wide(server: Quiver) -> Written:
    schema = pa.schema([(f"c{i:02d}", pa.int64()) for i in range(40)])
    return written(server, "wide", [table(({f"c{i:02d}": r * i for i in range(40)} for r in range(10)), schema)])


@pytest.mark.parametrize("reader_name", readers())
def test_wide_table(wide: Written, reader: Reader) -> None:
    check_table(reader, wide)


def test_stats_first_32_columns(wide: Written) -> None:
    """Statistics cover the first 32 columns (delta.dataSkippingNumIndexedCols'
    default), as Spark writes and reads them (every column before 36db801)."""
    for a in log_actions(wide.path, "add"):
        stats = json.loads(a["stats"])
        for kind in ("minValues", "maxValues", "nullCount"):
            assert sorted(stats[kind]) == [f"c{i:02d}" for i in range(32)], (kind, sorted(stats[kind]))
