"""Writes Quiver's reference Delta tables with Spark + delta-spark and delta-rs.

Run from the repository root with `make golden` (or
`python testdata/delta-golden/generate.py [--out DIR] [table ...]`). It
replaces every table it writes, then reads each back with Spark and checks
the facts that README.md documents and the Go tests assert (version, rows,
live files). The versions it must run with are pinned below: tables written
by other versions differ in features and layout, so the script refuses them.
"""

import argparse
import datetime as dt
import decimal
import glob
import json
import os
import shutil
import sys
from importlib.metadata import version

PINNED = {"pyspark": "4.0.1", "delta-spark": "4.0.0", "deltalake": "1.1.4", "pyarrow": "21.0.0"}

HERE = os.path.dirname(os.path.abspath(__file__))

# name -> (version, rows, live files); None = not checked (the table is
# refused by Spark after post-processing, or the fact varies).
EXPECT = {}
TABLES = {}


def table(name, version, rows, files):
    def register(fn):
        TABLES[name] = fn
        EXPECT[name] = (version, rows, files)
        return fn

    return register


def check_versions():
    wrong = {p: version(p) for p in PINNED if version(p) != PINNED[p]}
    if wrong:
        sys.exit(f"generate.py needs {PINNED}; installed: {wrong}")


def session():
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("quiver-delta-golden")
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.databricks.delta.snapshotPartitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    )
    spark = configure_spark_with_delta_pip(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def sql(spark, text, path):
    return spark.sql(text.replace("{t}", f"delta.`{path}`"))


def write(spark, path, rows, schema, files=1, mode="append", partition_by=None, **options):
    w = spark.createDataFrame(rows, schema).repartition(files).write.format("delta").mode(mode)
    if partition_by:
        w = w.partitionBy(*partition_by)
    for k, v in options.items():
        w = w.option(k, v)
    w.save(path)


def props(spark, path, **kv):
    pairs = ", ".join(f"'{k}' = '{v}'" for k, v in kv.items())
    sql(spark, f"ALTER TABLE {{t}} SET TBLPROPERTIES ({pairs})", path)


def log(path, *parts):
    return os.path.join(path, "_delta_log", *parts)


def commit(n):
    return f"{n:020d}.json"


def rewrite_commit(path, n, edit):
    """Rewrites commit n, each action passed through edit(dict) -> dict."""
    name = log(path, commit(n))
    with open(name) as f:
        actions = [json.loads(line) for line in f if line.strip()]
    with open(name, "w") as f:
        for a in actions:
            f.write(json.dumps(edit(a), separators=(",", ":")) + "\n")
    drop_crc(name)


def drop_crc(name):
    """Removes the Hadoop checksum side file of a file edited by hand."""
    crc = os.path.join(os.path.dirname(name), "." + os.path.basename(name) + ".crc")
    if os.path.exists(crc):
        os.remove(crc)


def remove(path, *patterns):
    for p in patterns:
        for f in glob.glob(log(path, p)) + glob.glob(log(path, "." + p + ".crc")):
            os.remove(f)


ID_STR = "id INT, str STRING"


# ---- 1. logs, appends, removes, time travel -------------------------------


@table("basic-append-overwrite", 3, 7, 3)
def basic_append_overwrite(spark, p):
    """v0 ids 0-4 (1 file), v1 overwrite ids 5-9 (2 files), v2 appends
    10-12 (1 file), v3 deletes id 12 copy-on-write; plus an uncommitted
    _delta_log/.tmp/<v4> that readers must ignore."""
    write(spark, p, [(i, f"v0-{i}") for i in range(5)], ID_STR)
    write(spark, p, [(i, f"v1-{i}") for i in range(5, 10)], ID_STR, files=2, mode="overwrite")
    write(spark, p, [(i, f"v2-{i}") for i in range(10, 13)], ID_STR)
    sql(spark, "DELETE FROM {t} WHERE id = 12", p)
    os.makedirs(log(p, ".tmp"))
    shutil.copy(log(p, commit(2)), log(p, ".tmp", commit(4)))


@table("basic-update", 1, 100, None)
def basic_update(spark, p):
    """v0 (id, 'val=id') for id < 100 in 2 files; v1 UPDATE str = 'N/A'
    where id < 50 (copy-on-write)."""
    write(spark, p, [(i, f"val={i}") for i in range(100)], ID_STR, files=2)
    sql(spark, "UPDATE {t} SET str = 'N/A' WHERE id < 50", p)


@table("basic-merge", 1, 140, None)
def basic_merge(spark, p):
    """v0 (id, 'val=id') for id < 100; v1 MERGE of ids 50-149: matched ->
    'N/A', not matched -> 'EXT', not matched by source with id < 10 ->
    deleted. Result: 10-49 'val=id', 50-99 'N/A', 100-149 'EXT'."""
    write(spark, p, [(i, f"val={i}") for i in range(100)], ID_STR, files=2)
    spark.createDataFrame([(i, "src") for i in range(50, 150)], ID_STR).createOrReplaceTempView("src")
    sql(spark, """MERGE INTO {t} AS t USING src AS s ON t.id = s.id
        WHEN MATCHED THEN UPDATE SET str = 'N/A'
        WHEN NOT MATCHED THEN INSERT (id, str) VALUES (s.id, 'EXT')
        WHEN NOT MATCHED BY SOURCE AND t.id < 10 THEN DELETE""", p)


@table("empty-after-delete", 1, 0, 0)
def empty_after_delete(spark, p):
    """v0 4 rows in 2 files, v1 DELETE of every row: no live file, 2 tombstones."""
    write(spark, p, [(i, "x") for i in range(4)], ID_STR, files=2)
    sql(spark, "DELETE FROM {t}", p)


@table("special-chars-path", 1, 0, 0)
def special_chars_path(spark, p):
    """A file under partition value 'special p@#h' (URL-encoded in the log),
    added in v0 and removed in v1: one tombstone."""
    write(spark, p, [(1, "special p@#h")], "id INT, p STRING", partition_by=["p"])
    sql(spark, "DELETE FROM {t}", p)


@table("versions-not-contiguous", None, None, None)
def versions_not_contiguous(spark, p):
    """Three appends, then commit 1 deleted by hand: readers must fail."""
    for v in range(3):
        write(spark, p, [(v, "x")], ID_STR)
    remove(p, commit(1), "00000000000000000001.crc")


@table("protocol-reader-99", None, None, None)
def protocol_reader_99(spark, p):
    """One append, then the protocol of commit 0 set by hand to reader
    version 99 / writer version 99: readers and writers must refuse."""
    write(spark, p, [(1, "x")], ID_STR)
    rewrite_commit(p, 0, lambda a: {"protocol": {"minReaderVersion": 99, "minWriterVersion": 99}} if "protocol" in a else a)
    remove(p, "00000000000000000000.crc")


@table("unknown-reader-feature", None, None, None)
def unknown_reader_feature(spark, p):
    """A deletion-vector table (3/7) whose protocol gains, by hand, a reader
    and writer feature nobody implements ('quiverUnknownFeature')."""
    write(spark, p, [(1, "x")], ID_STR)
    props(spark, p, **{"delta.enableDeletionVectors": "true"})

    def edit(a):
        if "protocol" in a:
            a["protocol"]["readerFeatures"].append("quiverUnknownFeature")
            a["protocol"]["writerFeatures"].append("quiverUnknownFeature")
        return a

    rewrite_commit(p, 1, edit)
    remove(p, "*.crc")


@table("commit-info-arbitrary", None, 2, 2)
def commit_info_arbitrary(spark, p):
    """Two appends; commitInfo.operationParameters of v1 rewritten by hand
    to hold non-string JSON values (numbers, null, lists, objects), as
    other writers do. Spark's own DESCRIBE HISTORY fails on them, so the
    version is not checked here."""
    write(spark, p, [(1, "x")], ID_STR)
    write(spark, p, [(2, "y")], ID_STR)

    def edit(a):
        if "commitInfo" in a:
            a["commitInfo"]["operationParameters"].update(
                {"n": 7, "f": 1.5, "none": None, "list": [1, "a"], "obj": {"k": [True]}})
        return a

    rewrite_commit(p, 1, edit)


# ---- 2. checkpoints and _last_checkpoint ----------------------------------


def ten_appends_and_deletes(spark, p):
    """v0-v9 append ids 10k..10k+9 (k = version), v10-v13 delete the ids
    ending in 5-9 of k = 0..3: 100 - 20 = 80 rows; checkpoint at 10."""
    for k in range(10):
        write(spark, p, [(10 * k + i, f"k{k}") for i in range(10)], "id LONG, str STRING")
    for k in range(4):
        sql(spark, f"DELETE FROM {{t}} WHERE id >= {10 * k + 5} AND id < {10 * k + 10}", p)


@table("checkpoint-classic", 13, 80, 10)
def checkpoint_classic(spark, p):
    """Classic single-file checkpoint at 10 (Spark's default interval),
    commits 11-13 after it; DELETEs rewrite files (no deletion vectors)."""
    ten_appends_and_deletes(spark, p)


def copy_of(p, base):
    """Copies the table base (written earlier, beside p) to p."""
    src = os.path.join(os.path.dirname(p), base)
    if not os.path.isdir(log(src)):
        sys.exit(f"{os.path.basename(p)} is a copy of {base}: write {base} first")
    shutil.copytree(src, p)


@table("checkpoint-corrupt-last", 13, 80, 10)
def checkpoint_corrupt_last(spark, p):
    """A copy of checkpoint-classic with _last_checkpoint truncated to half
    a JSON object: readers must fall back to listing the log."""
    copy_of(p, "checkpoint-classic")
    with open(log(p, "_last_checkpoint"), "r+") as f:
        f.truncate(len(f.read()) // 2)
    drop_crc(log(p, "_last_checkpoint"))


@table("checkpoint-no-last", 13, 80, 10)
def checkpoint_no_last(spark, p):
    """A copy of checkpoint-classic without _last_checkpoint."""
    copy_of(p, "checkpoint-classic")
    remove(p, "_last_checkpoint")


@table("checkpoint-stale-last", 5, 5, 5)
def checkpoint_stale_last(spark, p):
    """Appends v0-v5 with checkpointInterval 2 (checkpoints 2 and 4);
    _last_checkpoint rewritten by hand to name checkpoint 2."""
    write(spark, p, [(0, "x")], ID_STR)
    props(spark, p, **{"delta.checkpointInterval": "2"})
    for v in range(2, 6):
        write(spark, p, [(v, "x")], ID_STR)
    with open(log(p, "_last_checkpoint")) as f:
        last = json.load(f)
    assert last["version"] == 4, last
    with open(log(p, "_last_checkpoint"), "w") as f:
        json.dump({"version": 2, "size": 4}, f)
    drop_crc(log(p, "_last_checkpoint"))


@table("checkpoint-log-cleaned", 12, None, 12)
def checkpoint_log_cleaned(spark, p):
    """12 appends (one file each, partitioned by date), checkpointInterval 5;
    commits 0-4 and checkpoint 5 deleted by hand, as a log cleanup would:
    the table starts at checkpoint 10."""
    day = dt.date(2024, 1, 1)
    write(spark, p, [(0, day)], "id INT, date DATE", partition_by=["date"])
    props(spark, p, **{"delta.checkpointInterval": "5"})
    for v in range(2, 13):
        write(spark, p, [(v, day + dt.timedelta(days=v))], "id INT, date DATE", partition_by=["date"])
    remove(p, *[commit(v) for v in range(5)], *[f"{v:020d}.crc" for v in range(5)], "00000000000000000005.checkpoint.parquet")


@table("checkpoint-multipart", 2, 31, 4)
def checkpoint_multipart(spark, p):
    """checkpointInterval 1 and checkpoint.partSize 2: every commit writes a
    multi-part checkpoint (3 parts at v2); v0 1 row, v1 30 rows in 3 files."""
    spark.conf.set("spark.databricks.delta.checkpoint.partSize", "2")
    try:
        write(spark, p, [(0, "x")], ID_STR)
        props(spark, p, **{"delta.checkpointInterval": "1"})
        write(spark, p, [(i, "y") for i in range(30)], ID_STR, files=3)
    finally:
        spark.conf.unset("spark.databricks.delta.checkpoint.partSize")


@table("checkpoint-struct-stats", 12, None, 12)
def checkpoint_struct_stats(spark, p):
    """checkpoint.writeStatsAsJson false, writeStatsAsStruct true: the v10
    checkpoint has stats_parsed only; commits 0-12 carry JSON stats."""
    write(spark, p, [(0, "x")], ID_STR)
    props(spark, p, **{"delta.checkpoint.writeStatsAsJson": "false", "delta.checkpoint.writeStatsAsStruct": "true"})
    for v in range(2, 13):
        write(spark, p, [(v, "x")], ID_STR)


def v2_checkpoint(spark, p, fmt):
    spark.conf.set("spark.databricks.delta.checkpointV2.topLevelFileFormat", fmt)
    try:
        write(spark, p, [(i, "x") for i in range(5)], ID_STR)
        props(spark, p, **{"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "2"})
        write(spark, p, [(i, "y") for i in range(5, 10)], ID_STR)
    finally:
        spark.conf.unset("spark.databricks.delta.checkpointV2.topLevelFileFormat")


@table("checkpoint-v2-parquet", 2, 10, 2)
def checkpoint_v2_parquet(spark, p):
    """v2Checkpoint feature (checkpointPolicy v2): a UUID-named Parquet V2
    checkpoint at 2."""
    v2_checkpoint(spark, p, "parquet")


@table("checkpoint-v2-json", 2, 10, 2)
def checkpoint_v2_json(spark, p):
    """The same with a UUID-named JSON V2 checkpoint."""
    v2_checkpoint(spark, p, "json")


@table("domain-metadata", 2, 6, None)
def domain_metadata(spark, p):
    """Liquid clustering (CLUSTER BY id) and row tracking: domainMetadata
    delta.clustering and delta.rowTracking; two appends of 3 rows."""
    sql(spark, "CREATE TABLE {t} (id INT, str STRING) USING delta CLUSTER BY (id) "
               "TBLPROPERTIES ('delta.enableRowTracking' = 'true')", p)
    write(spark, p, [(i, "a") for i in range(3)], ID_STR)
    write(spark, p, [(i, "b") for i in range(3, 6)], ID_STR)


# ---- 3. exactly-once ------------------------------------------------------


@table("txn-app-ids", 4, 4, 4)
def txn_app_ids(spark, p):
    """Idempotent writes (txnAppId/txnVersion): app-a 0 then 3, app-b 7; a
    replay of app-a 3 writes nothing; checkpoints at 2 and 4 (interval 2)
    carry the txn actions."""
    write(spark, p, [(0, "a")], ID_STR, txnAppId="app-a", txnVersion="0")
    props(spark, p, **{"delta.checkpointInterval": "2"})
    write(spark, p, [(1, "b")], ID_STR, txnAppId="app-b", txnVersion="7")
    write(spark, p, [(2, "a")], ID_STR, txnAppId="app-a", txnVersion="3")
    write(spark, p, [(3, "a")], ID_STR, txnAppId="app-a", txnVersion="3")  # replay: skipped
    write(spark, p, [(3, "plain")], ID_STR)


# ---- 4. partitioning and path encoding ------------------------------------


@table("partition-null", 0, 2, 2)
def partition_null(spark, p):
    """(v=1, k='A') and (v=2, k=null): null goes to k=__HIVE_DEFAULT_PARTITION__."""
    write(spark, p, [(1, "A"), (2, None)], "v INT, k STRING", files=2, partition_by=["k"])


ESCAPED = ["A/A", "B B", "bar+%21", "c=d:e", "ü#?"]


@table("partition-escaped", 0, len(ESCAPED), len(ESCAPED))
def partition_escaped(spark, p):
    """Partition values needing escapes in directory names and log paths."""
    write(spark, p, [(i, v) for i, v in enumerate(ESCAPED)], "y INT, x STRING", partition_by=["x"])


PARTITION_TYPES = ("v STRING, p_int INT, p_long LONG, p_short SHORT, p_byte BYTE, p_bool BOOLEAN, "
                   "p_float FLOAT, p_double DOUBLE, p_string STRING, p_date DATE, p_decimal DECIMAL(10,2), "
                   "p_timestamp TIMESTAMP")
PARTITION_COLS = [c.split()[0] for c in PARTITION_TYPES.split(", ")][1:]


def typed_row(i):
    return (f"row{i}", i, 10**10 + i, i, i, i % 2 == 0, i + 0.5, i + 0.25, "null" if i == 1 else f"s{i}",
            dt.date(2024, 1, 1 + i), decimal.Decimal(f"{i}.25"),
            dt.datetime(2024, 1, 1, 10, 0, 0, 123456) + dt.timedelta(days=i))


@table("partition-types", 0, 3, 3)
def partition_types(spark, p):
    """11 partition columns of every primitive type: rows 0 and 1 (row 1's
    p_string is the literal string 'null'), row 2 all null. Timestamp
    partition values in delta-spark 4.0's default ISO 8601 UTC form."""
    rows = [typed_row(0), typed_row(1), ("row2",) + (None,) * len(PARTITION_COLS)]
    write(spark, p, rows, PARTITION_TYPES, files=3, partition_by=PARTITION_COLS)


@table("partition-timestamp-legacy", 0, 2, 2)
def partition_timestamp_legacy(spark, p):
    """Timestamp partition values in the legacy "yyyy-MM-dd HH:mm:ss" form of
    the session time zone (UTC), as Spark writes them with
    write.utcTimestampPartitionValues off (delta-spark 4.0 writes ISO 8601
    UTC by default, see partition-types): 2024-01-01 10:00:00 and
    2024-01-02 12:30:00."""
    spark.conf.set("spark.databricks.delta.write.utcTimestampPartitionValues", "false")
    try:
        rows = [("a", dt.datetime(2024, 1, 1, 10)), ("b", dt.datetime(2024, 1, 2, 12, 30))]
        write(spark, p, rows, "s STRING, ts TIMESTAMP", files=2, partition_by=["ts"])
    finally:
        spark.conf.unset("spark.databricks.delta.write.utcTimestampPartitionValues")


# ---- 5. types -------------------------------------------------------------


ALL_TYPES = ("id INT, b BYTE, s SHORT, l LONG, f FLOAT, d DOUBLE, bool BOOLEAN, str STRING, bin BINARY, "
             "date DATE, ts TIMESTAMP, dec4 DECIMAL(4,0), dec9 DECIMAL(9,2), dec18 DECIMAL(18,5), "
             "dec38 DECIMAL(38,10), arr ARRAY<INT>, m MAP<STRING,INT>, "
             "st STRUCT<a: STRING, n: STRUCT<x: INT, y: LONG>>")


def all_types_row(i):
    return (i, i, 100 * i, 10**12 * i, i / 4, i / 8, i % 2 == 0, f"str{i}", bytes([i, 255 - i]),
            dt.date(2000, 1, 1 + i), dt.datetime(2000, 1, 1, 0, 0, i), decimal.Decimal(i),
            decimal.Decimal(f"{i}.{i:02d}"), decimal.Decimal(f"{i}.00005"), decimal.Decimal(f"{i}.0000000001"),
            [i, i + 1], {f"k{i}": i}, (f"a{i}", (i, i)))


@table("types-all", 0, 11, 1)
def types_all(spark, p):
    """One file: rows 0-9 of every primitive, decimal and nested type, and
    row 10 all null but id; Spark per-column stats."""
    rows = [all_types_row(i) for i in range(10)] + [(10,) + (None,) * 17]
    write(spark, p, rows, ALL_TYPES)


INT96_ROWS = [
    (0, dt.datetime(2020, 1, 1, 8, 9, 10, 1000), dt.datetime(2020, 2, 1, 8, 9, 10)),
    (1, dt.datetime(2021, 10, 1, 8, 9, 20), dt.datetime(1999, 1, 1, 9)),
    (2, dt.datetime(2021, 10, 1, 8, 9, 20), dt.datetime(2000, 1, 1, 9)),
    (3, dt.datetime(1969, 1, 1), dt.datetime(1969, 1, 1)),
    (4, None, None),
]


@table("types-timestamp-int96", 0, 5, 4)
def types_timestamp_int96(spark, p):
    """Timestamps stored as legacy Parquet INT96 (outputTimestampType INT96),
    partitioned by a timestamp: (id, part, time) as INT96_ROWS, in UTC."""
    spark.conf.set("spark.sql.parquet.outputTimestampType", "INT96")
    try:
        write(spark, p, INT96_ROWS, "id LONG, part TIMESTAMP, time TIMESTAMP", partition_by=["part"])
    finally:
        spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")


@table("types-timestamp-ntz", 0, 9, None)
def types_timestamp_ntz(spark, p):
    """timestamp_ntz data and partition column (feature timestampNtz, 3/7):
    every pair of {2021-11-18 02:30:00.123456, 2013-07-05 17:01:00.123456, null}."""
    vals = [dt.datetime(2021, 11, 18, 2, 30, 0, 123456), dt.datetime(2013, 7, 5, 17, 1, 0, 123456), None]
    rows = [(3 * i + j, vals[j], vals[i]) for i in range(3) for j in range(3)]
    write(spark, p, rows, "id INT, tsNtz TIMESTAMP_NTZ, tsNtzPartition TIMESTAMP_NTZ", partition_by=["tsNtzPartition"])


@table("type-widening", 3, 2, 2)
def type_widening(spark, p):
    """typeWidening: an INT column widened to BIGINT after the first file."""
    write(spark, p, [(1, "x")], ID_STR)
    props(spark, p, **{"delta.enableTypeWidening": "true"})
    sql(spark, "ALTER TABLE {t} ALTER COLUMN id TYPE BIGINT", p)
    write(spark, p, [(2**40, "y")], "id LONG, str STRING")


@table("variant", 3, 3, 3)
def variant(spark, p):
    """A VARIANT column (variantType feature): 3 inserts, checkpoint at 2."""
    sql(spark, "CREATE TABLE {t} (id INT, v VARIANT) USING delta TBLPROPERTIES ('delta.checkpointInterval' = '2')", p)
    for i in range(3):
        sql(spark, f"INSERT INTO {{t}} SELECT {i}, parse_json('{{\"n\": {i}}}')", p)


# ---- 6. deletion vectors, column mapping, other features ------------------


@table("dv-small", 2, 8, 1)
def dv_small(spark, p):
    """value 0-9 in one file; v1 DELETE value IN (0, 9) with deletion
    vectors: one relative ('u') DV of cardinality 2 at offset 1."""
    write(spark, p, [(i,) for i in range(10)], "value INT")
    sql(spark, "ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')", p)
    sql(spark, "DELETE FROM {t} WHERE value IN (0, 9)", p)


@table("dv-same-file", 4, 47, 1)
def dv_same_file(spark, p):
    """id 0-49 in one file; v2-v4 delete ids 10, 20, 30 one by one: the same
    file re-added with a new DV each time (cardinality 1, 2, 3)."""
    write(spark, p, [(i,) for i in range(50)], "id INT")
    props(spark, p, **{"delta.enableDeletionVectors": "true"})
    for i in (10, 20, 30):
        sql(spark, f"DELETE FROM {{t}} WHERE id = {i}", p)


@table("dv-partitioned-checkpoint", 16, 35, 10)
def dv_partitioned_checkpoint(spark, p):
    """(part = x % 10, col1 = x, col2 = 'foo' + x % 5) for x < 50,
    partitioned by part (10 files); deletion vectors on; then one DELETE per
    col1 in {0, 2, ..., 28} (15 commits, v2-v16); checkpoint at 10."""
    rows = [(x % 10, x, f"foo{x % 5}") for x in range(50)]
    write(spark, p, rows, "part INT, col1 INT, col2 STRING", files=1, partition_by=["part"])
    props(spark, p, **{"delta.enableDeletionVectors": "true"})
    for x in range(0, 30, 2):
        sql(spark, f"DELETE FROM {{t}} WHERE col1 = {x}", p)


@table("dv-large", 2, 35000, 2)
def dv_large(spark, p):
    """id 0-69999 in 2 files (0-34999, 35000-69999); one DELETE of the even
    ids marks 17500 rows in each file (roaring bitmap containers)."""
    spark.range(70000).selectExpr("CAST(id AS INT) AS id").repartitionByRange(2, "id").write.format("delta").save(p)
    props(spark, p, **{"delta.enableDeletionVectors": "true"})
    sql(spark, "DELETE FROM {t} WHERE id % 2 = 0", p)


MAPPED = "id INT, `Name With Space` STRING, st STRUCT<a: INT>, arr ARRAY<STRING>, m MAP<STRING, INT>"


def mapped_rows(spark, p, extra):
    sql(spark, f"CREATE TABLE {{t}} ({MAPPED}) USING delta TBLPROPERTIES ({extra})", p)
    sql(spark, "INSERT INTO {t} VALUES (0, 'a', named_struct('a', 0), array('x'), map('k', 0)), "
               "(1, 'b', named_struct('a', 1), array('y'), map('k', 1)), (2, NULL, NULL, NULL, NULL)", p)


@table("column-mapping-name", 1, 3, None)
def column_mapping_name(spark, p):
    """Column mapping mode name (physical names col-<uuid>), 3 rows."""
    mapped_rows(spark, p, "'delta.columnMapping.mode' = 'name'")


@table("column-mapping-id", 1, 3, None)
def column_mapping_id(spark, p):
    """Column mapping mode id (Parquet field ids), 3 rows."""
    mapped_rows(spark, p, "'delta.columnMapping.mode' = 'id'")


@table("iceberg-compat-v2", 1, 3, None)
def iceberg_compat_v2(spark, p):
    """icebergCompatV2 with column mapping id (a minimal writer must refuse)."""
    mapped_rows(spark, p, "'delta.columnMapping.mode' = 'id', 'delta.enableIcebergCompatV2' = 'true'")


@table("vacuum-protocol-check", 1, 100, None)
def vacuum_protocol_check(spark, p):
    """vacuumProtocolCheck (reader and writer feature) and appendOnly:
    (id, 'val=id') for id < 100."""
    sql(spark, "CREATE TABLE {t} (id INT, str STRING) USING delta TBLPROPERTIES "
               "('delta.feature.vacuumProtocolCheck' = 'supported', 'delta.appendOnly' = 'true')", p)
    write(spark, p, [(i, f"val={i}") for i in range(100)], ID_STR, files=2)


@table("change-data-feed", 3, 3, None)
def change_data_feed(spark, p):
    """enableChangeDataFeed: v1 appends 4 rows, v2 UPDATE and v3 DELETE write
    cdc actions and _change_data/ files."""
    sql(spark, "CREATE TABLE {t} (id INT, str STRING) USING delta TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')", p)
    write(spark, p, [(i, "x") for i in range(4)], ID_STR)
    sql(spark, "UPDATE {t} SET str = 'y' WHERE id = 1", p)
    sql(spark, "DELETE FROM {t} WHERE id = 2", p)


@table("in-commit-timestamps", 2, 2, 2)
def in_commit_timestamps(spark, p):
    """inCommitTimestamp writer feature: commitInfo.inCommitTimestamp first
    in every commit."""
    sql(spark, "CREATE TABLE {t} (id INT, str STRING) USING delta TBLPROPERTIES ('delta.enableInCommitTimestamps' = 'true')", p)
    write(spark, p, [(1, "x")], ID_STR)
    write(spark, p, [(2, "y")], ID_STR)


# ---- 7. written by delta-rs ----------------------------------------------


@table("deltars-partitioned-checkpoint", 2, 5, 4)
def deltars_partitioned_checkpoint(spark, p):
    """delta-rs (deltalake) writes: v0 creates 4 rows partitioned by k,
    v1 appends 2, v2 deletes k = 'b'; then create_checkpoint() at v2."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    def batch(ids, ks):
        return pa.table({"id": pa.array(ids, pa.int32()), "k": pa.array(ks, pa.string())})

    write_deltalake(p, batch([0, 1, 2, 3], ["a", "b", "c d", "a"]), partition_by=["k"])
    write_deltalake(p, batch([4, 5, 6], ["c d", "e", "b"]), mode="append", partition_by=["k"])
    t = DeltaTable(p)
    t.delete("k = 'b'")
    t.create_checkpoint()


def check(spark, name, p):
    want_version, want_rows, want_files = EXPECT[name]
    if want_version is not None:
        got = sql(spark, "DESCRIBE HISTORY {t}", p).agg({"version": "max"}).first()[0]
        assert got == want_version, f"{name}: version {got}, want {want_version}"
    if want_rows is not None:
        got = spark.read.format("delta").load(p).count()
        assert got == want_rows, f"{name}: {got} rows, want {want_rows}"
    if want_files is not None:
        got = sql(spark, "DESCRIBE DETAIL {t}", p).first()["numFiles"]
        assert got == want_files, f"{name}: {got} files, want {want_files}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=HERE, help="folder of the tables (default: beside this script)")
    ap.add_argument("tables", nargs="*", help="tables to write (default: all)")
    args = ap.parse_args()
    check_versions()
    names = args.tables or list(TABLES)
    unknown = set(names) - set(TABLES)
    if unknown:
        sys.exit(f"unknown tables {sorted(unknown)}")
    spark = session()
    for name in names:
        p = os.path.join(os.path.abspath(args.out), name)
        shutil.rmtree(p, ignore_errors=True)
        print(f"== {name}", flush=True)
        TABLES[name](spark, p)
        check(spark, name, p)
        shutil.rmtree(log(p, "_staged_commits"), ignore_errors=True)
    spark.stop()


if __name__ == "__main__":
    main()
