"""Quiver's Delta writes against the reference writers, same run, same machine.

    make bench-delta                       # builds bin/quiver, ensures .venv, runs this
    .venv/bin/python bench/delta_vs_reference.py --runs 5 --json out.json

Append: ROWS rows (default 2,000,000) of the standard workload's schema (int64
id, timestamp[us, UTC] ts, int64 user_id, float64 amount and score, utf8 name
and category, bool active) in batches of 65,536 rows, generated before timing,
  - through Flight into `quiver serve` (bin/quiver, a separate process, delta
    append endpoint, zstd), 1 stream, 4 and 16 concurrent streams (the
    batches dealt round-robin, one connection and one auto-commit each);
  - delta-rs `write_deltalake` of the same pyarrow batches in process
    (mode append, ZSTD level 3, and level 1: the size Quiver's zstd makes);
  - pyarrow.parquet.write_table of the table as one file (Arrow C++'s
    Parquet writer, zstd at its default level, no Delta log);
  - for reference, the same Flight stream into a discard endpoint (what the
    pyarrow client and gRPC cost alone, on the same two cores), and
    `quiver bench` (the arrow-go client of bench/, its own standard-workload
    batches of the same schema and size) into another append endpoint of the
    same server, timed by quiver bench itself; and 1 stream into an endpoint
    with `parquet.integer_encoding: delta_binary_packed` (opt-in: smaller
    files, less zstd work).
Each run writes a new table; the timing ends when the commit is acknowledged.
The report also gives the median CPU seconds (user+system) that this process and
the quiver process spent during each write (delta-rs: this process alone; the
Go client's figure includes its own process's work neither), and the quiver
process's CPU seconds per million rows at 1, 4 and 16 streams next to the raw
encoder's (bin/parquetencode: writers/parquetio alone encoding the same
batches, read from an Arrow IPC file before timing, zstd, one stream): on two
cores shared by the clients and the server, wall time at many streams
measures the clients as much as the server; CPU per row says whether the
server scales.

Upsert: a 2,000,000-row table, then two changelogs of 200,000 rows (100,000
existing ids spread evenly over the table with new values, 100,000 new ids),
keyed on id, each timed:
  - Quiver: a delta upsert endpoint with deletion vectors (merge_keys [id]),
    the seed written by a first (untimed) stream, the changelogs as auto-commit
    streams;
  - delta-rs `DeltaTable.merge` (when_matched_update_all,
    when_not_matched_insert_all on t.id = s.id; delta-rs rewrites files, it
    does not write deletion vectors), seed by `write_deltalake`;
  - Spark `MERGE INTO ... WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED
    THEN INSERT *` on local[2] (Delta Lake, delta.enableDeletionVectors=true,
    zstd), seed by CREATE TABLE AS SELECT, source a Parquet file of the
    changelog; one untimed small merge first warms the JVM.
  - Quiver again into a table with every log feature of a new Databricks
    table (column mapping in name mode, row tracking, deletion vectors, V2
    checkpoint policy, in-commit timestamps, checkpoint interval 2;
    clustering off),
    its version 0 written by all_features_table; the append part writes 1
    stream into such a table too. The goal is at least 0.9x the plain table.
Every engine pauses SETTLE seconds after its seed. After each run the three
tables are read back with delta-rs (count, distinct ids, sum(amount)) and must
agree.

Engines alternate their order from run to run; the report gives rows/s per run,
medians and the ratios of the medians. Needs .venv (interop/run --venv-only),
Java 17 for Spark (--no-spark skips it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "interop"))
from helpers import REPO, Client, Quiver, log_actions, start_spark  # noqa: E402

BATCH = 65_536
STREAMS = (1, 4, 16)
SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("ts", pa.timestamp("us", tz="UTC")),
    ("user_id", pa.int64()),
    ("amount", pa.float64()),
    ("score", pa.float64()),
    ("name", pa.string()),
    ("category", pa.string()),
    ("active", pa.bool_()),
])
T0_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
CATEGORIES = pa.array([f"category-{i:02d}" for i in range(16)])
LETTERS = bytes(range(ord("a"), ord("a") + 26)) + bytes(range(ord("A"), ord("A") + 26))
TO_LETTERS = bytes(LETTERS[i % len(LETTERS)] for i in range(256))
ZSTD_LEVEL = 3
# Quiver's zstd (klauspost's fastest level with literal entropy coding)
# makes files about the size of zstd level 1's: delta-rs at level 1 too is
# the same-size comparison (docs/delta.md, "The zstd codec").
ZSTD_LEVEL_FAST = 1


# --- data -------------------------------------------------------------------


def rows(ids: pa.Array, seed: int) -> pa.Table:
    """The standard workload's columns for ids, random from seed (numpy-free)."""
    n = len(ids)
    rnd = random.Random(seed)

    def uniform() -> pa.Array:
        return pc.random(n, initializer=rnd.getrandbits(63))

    lengths = pc.cast(pc.floor(pc.add(pc.multiply(uniform(), 17), 8)), pa.int32())  # 8..24
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(lengths)])
    total = offsets[-1].as_py()
    data = rnd.randbytes(total).translate(TO_LETTERS)
    names = pa.StringArray.from_buffers(n, offsets.buffers()[1], pa.py_buffer(data))
    return pa.table([
        ids,
        pc.cast(pc.add(pc.multiply(ids, 1000), T0_US), pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pc.cast(pc.floor(pc.multiply(uniform(), 1e6)), pa.int64()),
        pc.multiply(uniform(), 1000.0),
        uniform(),
        names,
        pc.take(CATEGORIES, pc.cast(pc.floor(pc.multiply(uniform(), 16)), pa.int32())),
        pc.less(uniform(), 0.5),
    ], schema=SCHEMA)


def batched(table: pa.Table) -> pa.Table:
    """table as 65,536-row record batches."""
    return pa.Table.from_batches(table.combine_chunks().to_batches(max_chunksize=BATCH), SCHEMA)


def changelog(base: int, n: int, first_new: int, offset: int, seed: int) -> pa.Table:
    """n rows: n/2 existing ids spread evenly over 0..base (every
    base/(n/2)-th id from offset) with new values, n/2 new ids from first_new."""
    half = n // 2
    step = base // half
    existing = pa.array(range(offset, offset + step * half, step), pa.int64())
    new = pa.array(range(first_new, first_new + n - half), pa.int64())
    return batched(rows(pa.concat_arrays([existing, new]), seed))


# The log features of a new Databricks table (clustering aside), as
# all_features_table creates it.
ALL_FEATURES = {
    "delta.columnMapping.mode": "name",
    "delta.enableRowTracking": "true",
    "delta.rowTracking.materializedRowIdColumnName": "_row-id-col-bench",
    "delta.rowTracking.materializedRowCommitVersionColumnName": "_row-commit-version-col-bench",
    "delta.enableDeletionVectors": "true",
    "delta.checkpointPolicy": "v2",
    "delta.enableInCommitTimestamps": "true",
    "delta.inCommitTimestampEnablementVersion": "0",
    "delta.checkpointInterval": "2",
}


def all_features_table(path: Path) -> None:
    """Writes version 0 of a table of SCHEMA with ALL_FEATURES, as Spark's
    CREATE TABLE does (protocol 3/7 listing the features, columns with
    column mapping ids and col-<uuid> physical names)."""
    delta_type = {pa.int64(): "long", pa.float64(): "double", pa.string(): "string", pa.bool_(): "boolean"}
    fields = [{"name": f.name, "type": "timestamp" if pa.types.is_timestamp(f.type) else delta_type[f.type],
               "nullable": True, "metadata": {"delta.columnMapping.id": i + 1,
                                              "delta.columnMapping.physicalName": f"col-{uuid.uuid4()}"}}
              for i, f in enumerate(SCHEMA)]
    now = int(time.time() * 1000)
    conf = dict(ALL_FEATURES, **{"delta.inCommitTimestampEnablementTimestamp": str(now),
                                 "delta.columnMapping.maxColumnId": str(len(fields))})
    actions = [
        {"commitInfo": {"timestamp": now, "inCommitTimestamp": now, "operation": "CREATE TABLE"}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                      "readerFeatures": ["columnMapping", "deletionVectors", "v2Checkpoint"],
                      "writerFeatures": ["columnMapping", "deletionVectors", "v2Checkpoint", "rowTracking", "domainMetadata",
                                         "inCommitTimestamp", "appendOnly", "invariants"]}},
        {"metaData": {"id": f"bench-{path.name}", "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps({"type": "struct", "fields": fields}),
                      "partitionColumns": [], "configuration": conf, "createdTime": now}},
    ]
    log = path / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


# --- measurement helpers ----------------------------------------------------


def timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def proc_stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the process name (field 3 on)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def proc_cpu(pid: int) -> float:
    """user+system CPU seconds of process pid so far (Linux /proc)."""
    fields = proc_stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_faults(pid: int) -> int:
    """Minor page faults of process pid so far (Linux /proc): memory it
    touched for the first time, or again after returning it to the OS."""
    return int(proc_stat(pid)[7])


def load() -> float:
    return os.getloadavg()[0]


def summary(conn_rows: int, secs: list[float]) -> dict[str, Any]:
    rates = [conn_rows / s for s in secs]
    return {"rows": conn_rows, "seconds": secs, "rows_per_s": rates, "median_rows_per_s": statistics.median(rates)}


def fmt_rate(r: float) -> str:
    return f"{r / 1e6:.2f} M" if r >= 1e6 else f"{r / 1e3:.0f} k"


def table_digest(path: Path) -> tuple[int, int, float]:
    """count, distinct ids and sum(amount) as delta-rs reads the table
    (DataFusion, which applies deletion vectors)."""
    from deltalake import DeltaTable, QueryBuilder

    got = QueryBuilder().register("t", DeltaTable(str(path))).execute(
        "SELECT count(*) AS n, count(DISTINCT id) AS ids, sum(amount) AS s FROM t").read_all()
    return got["n"][0].as_py(), got["ids"][0].as_py(), round(got["s"][0].as_py(), 3)


# --- engines ----------------------------------------------------------------


def quiver_put_streams(addr: str, endpoint: str, table: pa.Table, streams: int) -> None:
    """table's batches dealt round-robin to streams concurrent auto-commit
    puts, each on its own connection; returns when every commit is acked."""
    batches = table.to_batches()
    parts = [pa.Table.from_batches(batches[i::streams], SCHEMA) for i in range(streams)]
    clients = [Client(addr) for _ in range(streams)]
    errors: list[BaseException] = []

    def put(c: Client, part: pa.Table) -> None:
        try:
            c.put(endpoint, part, chunk=BATCH)
        except BaseException as e:  # reported after join
            errors.append(e)

    try:
        if streams == 1:
            put(clients[0], parts[0])
        else:
            threads = [threading.Thread(target=put, args=(c, p)) for c, p in zip(clients, parts)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        for c in clients:
            c.close()
    if errors:
        raise errors[0]


def deltars_props(level: int = ZSTD_LEVEL) -> Any:
    from deltalake import WriterProperties

    return WriterProperties(compression="ZSTD", compression_level=level)


def deltars_write(path: Path, table: pa.Table, level: int = ZSTD_LEVEL) -> None:
    from deltalake import write_deltalake

    write_deltalake(str(path), table, mode="append", writer_properties=deltars_props(level))


def deltars_merge(path: Path, source: pa.Table) -> None:
    from deltalake import DeltaTable

    (DeltaTable(str(path))
     .merge(source=source, predicate="t.id = s.id", source_alias="s", target_alias="t",
            writer_properties=deltars_props())
     .when_matched_update_all().when_not_matched_insert_all().execute())


def spark_session(tmp: Path) -> Any:
    """The interop suite's SparkSession with zstd Parquet and 2 GiB of
    driver memory."""
    return start_spark(tmp, "quiver-delta-bench", **{
        "spark.driver.memory": "2g",
        "spark.sql.parquet.compression.codec": "zstd",
    })


def spark_seed(spark: Any, path: Path, seed_parquet: Path) -> None:
    spark.sql(f"CREATE TABLE delta.`{path}` USING delta "
              "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true') "
              f"AS SELECT * FROM parquet.`{seed_parquet}`")


def spark_merge(spark: Any, path: Path, source_parquet: Path) -> None:
    spark.read.parquet(str(source_parquet)).createOrReplaceTempView("s")
    spark.sql(f"MERGE INTO delta.`{path}` t USING s ON t.id = s.id "
              "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")


# --- the benchmark ----------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quiver", default=str(REPO / "bin" / "quiver"), help="the quiver binary")
    ap.add_argument("--parquetencode", default=str(REPO / "bin" / "parquetencode"),
                    help="the raw encoder (go build -o bin/parquetencode ./bench/cmd/parquetencode)")
    ap.add_argument("--rows", type=int, default=2_000_000, help="append rows, and upsert table rows")
    ap.add_argument("--changelog-rows", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--settle", type=float, default=1.0, help="seconds every engine waits after its seed")
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--only", choices=["append", "upsert"], help="one part only")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="quiver-delta-bench-"))
    print(f"work folder {work}; load average {os.getloadavg()}", flush=True)
    t = time.perf_counter()
    data = batched(rows(pa.array(range(args.rows), pa.int64()), seed=1))
    cl = [changelog(args.rows, args.changelog_rows, args.rows + i * args.changelog_rows, offset=i * 7, seed=10 + i)
          for i in range(2)]
    print(f"generated {data.num_rows} rows in {len(data.to_batches())} batches and 2 changelogs "
          f"of {args.changelog_rows} in {time.perf_counter() - t:.1f}s", flush=True)

    runs = args.runs
    parts = ["append", "upsert"] if args.only is None else [args.only]
    endpoints: list[dict[str, Any]] = []
    for r in range(runs):
        for s in STREAMS:
            endpoints.append({"name": f"append_s{s}_r{r}", "sink": "delta", "delta": {
                "table_uri": f"file://{work}/quiver_append/append_s{s}_r{r}", "mode": "append",
                "parquet": {"compression": "zstd"}}})
        endpoints.append({"name": f"append_go_r{r}", "sink": "delta", "delta": {
            "table_uri": f"file://{work}/quiver_append/append_go_r{r}", "mode": "append",
            "parquet": {"compression": "zstd"}}})
        endpoints.append({"name": f"append_all_r{r}", "sink": "delta", "delta": {
            "table_uri": f"file://{work}/quiver_append/append_all_r{r}", "mode": "append",
            "parquet": {"compression": "zstd"}}})
        endpoints.append({"name": f"append_dbp_r{r}", "sink": "delta", "delta": {
            "table_uri": f"file://{work}/quiver_append/append_dbp_r{r}", "mode": "append",
            "parquet": {"compression": "zstd", "integer_encoding": "delta_binary_packed"}}})
        for name in (f"upsert_r{r}", f"upsert_all_r{r}"):
            endpoints.append({"name": name, "sink": "delta", "delta": {
                "table_uri": f"file://{work}/quiver/{name}", "mode": "upsert", "merge_keys": ["id"],
                "deletion_vectors": True, "parquet": {"compression": "zstd"}}})
    endpoints.append({"name": "devnull", "sink": "discard"})  # Flight alone: the client's and transport's share
    server = Quiver(Path(args.quiver), work / "server", endpoints)
    results: dict[str, Any] = {"rows": args.rows, "changelog_rows": args.changelog_rows, "runs": runs,
                               "load_start": os.getloadavg(), "cpus": os.cpu_count()}
    spark = None
    try:
        if "append" in parts:
            results["append"] = bench_append(server, Path(args.quiver), data, work, runs)
            results["append"]["raw_encoder"] = raw_encoder(Path(args.parquetencode), data, work, runs)
        if "upsert" in parts:
            if not args.no_spark:
                t = time.perf_counter()
                spark = spark_session(work / "spark")
                warm_spark(spark, work)
                print(f"spark started and warmed in {time.perf_counter() - t:.1f}s", flush=True)
            results["upsert"] = bench_upsert(server, spark, data, cl, work, runs, args.settle)
    finally:
        if spark is not None:
            spark.stop()
        server.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    results["load_end"] = os.getloadavg()
    report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


def quiver_bench_go(binary: Path, addr: str, endpoint: str, rows: int) -> float:
    """`quiver bench` (arrow-go client, the standard workload generated
    before timing) of one 1-stream run into endpoint: its seconds."""
    out = subprocess.run([str(binary), "bench", "--addr", addr, "--endpoint", endpoint, "--streams", "1",
                          "--runs", "1", "--rows", str(rows), "--json"], check=True, capture_output=True, text=True)
    res = json.loads(out.stdout)["results"][0]
    return rows / res["rows_per_s"]


def raw_encoder(binary: Path, data: pa.Table, work: Path, runs: int) -> dict[str, Any]:
    """bin/parquetencode over data (an Arrow IPC file written first), 1
    stream, zstd: the median CPU and wall seconds of runs runs."""
    path = work / "data.arrows"
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(f, data.schema) as w:
        w.write_table(data)
    res = [json.loads(subprocess.run([str(binary), "--codec", "zstd", "--streams", "1", str(path)],
                                     check=True, capture_output=True, text=True).stdout) for _ in range(runs)]
    path.unlink()
    return {"rows": data.num_rows, "median_cpu_seconds": statistics.median(r["cpu_seconds"] for r in res),
            "median_wall_seconds": statistics.median(r["wall_seconds"] for r in res)}


def pyarrow_write(folder: Path, data: pa.Table) -> None:
    """data as one Parquet file of Arrow C++'s writer (zstd, its default level)."""
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(data, folder / "part.parquet", compression="zstd")


def bench_append(server: Quiver, binary: Path, data: pa.Table, work: Path, runs: int) -> dict[str, Any]:
    secs: dict[str, list[float]] = {"quiver_1": [], "quiver_4": [], "quiver_16": [], "deltars": [], "deltars_l1": [],
                                    "pyarrow": [], "discard_1": [], "quiver_go_1": [], "quiver_all_1": [],
                                    "quiver_dbp_1": []}
    loads = []
    sizes: dict[str, int] = {}
    cpu: dict[str, list[float]] = {name: [] for name in secs}  # this process's + the server's CPU seconds
    server_cpu: dict[str, list[float]] = {name: [] for name in secs}  # the server's alone
    for r in range(runs):
        jobs: list[tuple[str, Callable[[], None] | None]] = [
            ("quiver_1", lambda: quiver_put_streams(server.flight_addr, f"append_s1_r{r}", data, 1)),
            ("quiver_4", lambda: quiver_put_streams(server.flight_addr, f"append_s4_r{r}", data, 4)),
            ("quiver_16", lambda: quiver_put_streams(server.flight_addr, f"append_s16_r{r}", data, 16)),
            ("deltars", lambda: deltars_write(work / f"deltars/append_r{r}", data)),
            ("deltars_l1", lambda: deltars_write(work / f"deltars/append_l1_r{r}", data, ZSTD_LEVEL_FAST)),
            # Arrow C++'s Parquet writer alone (no Delta log), its default zstd level.
            ("pyarrow", lambda: pyarrow_write(work / f"pyarrow/r{r}", data)),
            ("discard_1", lambda: quiver_put_streams(server.flight_addr, "devnull", data, 1)),
            ("quiver_go_1", None),
            ("quiver_all_1", lambda: quiver_put_streams(server.flight_addr, f"append_all_r{r}", data, 1)),
            ("quiver_dbp_1", lambda: quiver_put_streams(server.flight_addr, f"append_dbp_r{r}", data, 1)),
        ]
        all_features_table(server.table_path(f"append_all_r{r}"))
        k = r % len(jobs)
        for name, fn in jobs[k:] + jobs[:k]:
            os.sync()  # earlier jobs' unsynced files are not written during this one
            loads.append(load())
            s0 = proc_cpu(server.proc.pid)
            c0 = time.process_time() + s0
            if fn is None:  # its CPU seconds include generating its batches and a warm-up batch
                secs[name].append(quiver_bench_go(binary, server.flight_addr, f"append_go_r{r}", data.num_rows))
            else:
                secs[name].append(timed(fn))
            s1 = proc_cpu(server.proc.pid)
            cpu[name].append(time.process_time() + s1 - c0)
            server_cpu[name].append(s1 - s0)
            print(f"append run {r} {name}: {data.num_rows / secs[name][-1] / 1e6:.2f} M rows/s "
                  f"({secs[name][-1]:.2f}s, load {loads[-1]:.1f})", flush=True)
        for name, path in (("quiver_1", server.table_path(f"append_s1_r{r}")),
                           ("quiver_4", server.table_path(f"append_s4_r{r}")),
                           ("quiver_16", server.table_path(f"append_s16_r{r}")),
                           ("deltars", work / f"deltars/append_r{r}"),
                           ("deltars_l1", work / f"deltars/append_l1_r{r}"),
                           ("pyarrow", work / f"pyarrow/r{r}"),
                           ("quiver_go_1", server.table_path(f"append_go_r{r}")),
                           ("quiver_all_1", server.table_path(f"append_all_r{r}")),
                           ("quiver_dbp_1", server.table_path(f"append_dbp_r{r}"))):
            if name == "pyarrow":
                n = ids = pq.read_metadata(path / "part.parquet").num_rows
            else:
                n, ids, _ = table_digest(path)
            if name == "quiver_go_1":  # its own batches, and one warm-up batch before timing
                assert n >= data.num_rows, f"append {name} run {r}: {n} rows"
            else:
                assert n == ids == data.num_rows, f"append {name} run {r}: {n} rows, {ids} ids"
            sizes[name] = sum(f.stat().st_size for f in path.rglob("*.parquet"))
        shutil.rmtree(work / "quiver_append", ignore_errors=True)  # keep the disk small
        shutil.rmtree(work / "deltars", ignore_errors=True)
        shutil.rmtree(work / "pyarrow", ignore_errors=True)
    out = {name: summary(data.num_rows, s) for name, s in secs.items()}
    for name, size in sizes.items():
        out[name]["parquet_bytes"] = size
    for name, c in cpu.items():
        out[name]["median_cpu_seconds"] = statistics.median(c)
        out[name]["median_server_cpu_seconds"] = statistics.median(server_cpu[name])
    out["load"] = [min(loads), max(loads)]
    return out


def warm_spark(spark: Any, work: Path) -> None:
    small = batched(rows(pa.array(range(100_000), pa.int64()), seed=99))
    ch = changelog(100_000, 10_000, 100_000, 0, 98)
    pq.write_table(small, work / "warm_seed.parquet")
    pq.write_table(ch, work / "warm_cl.parquet")
    spark_seed(spark, work / "spark_warm", work / "warm_seed.parquet")
    spark_merge(spark, work / "spark_warm", work / "warm_cl.parquet")


def bench_upsert(server: Quiver, spark: Any, data: pa.Table, cl: list[pa.Table], work: Path, runs: int,
                 settle: float) -> dict[str, Any]:
    seed_pq = work / "seed.parquet"
    pq.write_table(data, seed_pq, compression="zstd")
    cl_pq = []
    for i, c in enumerate(cl):
        cl_pq.append(work / f"changelog{i}.parquet")
        pq.write_table(c, cl_pq[-1], compression="zstd")
    engines = ["quiver", "quiver_all", "deltars"] + ([] if spark is None else ["spark"])
    secs: dict[str, list[list[float]]] = {e: [[], []] for e in engines}  # [first upserts, second upserts]
    loads = []
    dv_seen = {e: False for e in engines}
    expected = data.num_rows + sum(c.num_rows // 2 + c.num_rows % 2 for c in cl)

    for r in range(runs):
        paths = {"quiver": server.table_path(f"upsert_r{r}"), "quiver_all": server.table_path(f"upsert_all_r{r}"),
                 "deltars": work / f"deltars/upsert_r{r}", "spark": work / f"spark_tables/upsert_r{r}"}

        def run_engine(e: str) -> None:
            p = paths[e]
            if e in ("quiver", "quiver_all"):
                name = f"upsert_r{r}" if e == "quiver" else f"upsert_all_r{r}"
                if e == "quiver_all":
                    all_features_table(p)
                c = server.client()
                c.put(name, data, chunk=BATCH)
                up: Callable[[int], None] = lambda i: c.put(name, cl[i], chunk=BATCH)  # noqa: E731
            elif e == "deltars":
                deltars_write(p, data)
                up = lambda i: deltars_merge(p, cl[i])  # noqa: E731
            else:
                spark_seed(spark, p, seed_pq)
                up = lambda i: spark_merge(spark, p, cl_pq[i])  # noqa: E731
            time.sleep(settle)
            for i in range(len(cl)):
                os.sync()  # earlier runs' unsynced files are not written during this one
                loads.append(load())
                secs[e][i].append(timed(lambda: up(i)))
                print(f"upsert run {r} {e} #{i + 1}: {cl[i].num_rows / secs[e][i][-1] / 1e3:.0f} k rows/s "
                      f"({secs[e][i][-1]:.2f}s, load {loads[-1]:.1f})", flush=True)

        k = r % len(engines)
        for e in engines[k:] + engines[:k]:
            run_engine(e)
        digests = {e: table_digest(paths[e]) for e in engines}
        for e in engines:
            dv_seen[e] |= any(a.get("deletionVector") for a in log_actions(paths[e], "add"))
        assert len(set(digests.values())) == 1, f"upsert run {r}: the engines disagree: {digests}"
        n, ids, _ = digests["quiver"]
        assert n == ids == expected, f"upsert run {r}: {n} rows, {ids} ids, want {expected}"
        for e, p in paths.items():
            if e not in ("quiver", "quiver_all"):
                shutil.rmtree(p, ignore_errors=True)
    out: dict[str, Any] = {}
    for e in engines:
        out[e] = {"first": summary(cl[0].num_rows, secs[e][0]), "second": summary(cl[1].num_rows, secs[e][1]),
                  "deletion_vectors_written": dv_seen[e]}
    out["load"] = [min(loads), max(loads)]
    return out


def report(res: dict[str, Any]) -> None:
    print(f"\nload average at start {res['load_start']}, at end {res['load_end']}; {res['cpus']} CPUs; "
          f"medians of {res['runs']} alternating runs")
    if a := res.get("append"):
        d, p = a["deltars"]["median_rows_per_s"], a["pyarrow"]["median_rows_per_s"]
        print(f"\nAppend, {res['rows']:,} rows, zstd (load {a['load'][0]:.1f}-{a['load'][1]:.1f})")
        print(f"{'target':<34}{'median rows/s':>15}  {'runs':<46}{'vs delta-rs zstd ' + str(ZSTD_LEVEL):>8}"
              f"{'vs pyarrow':>11}")
        for name, label in (("quiver_1", "Quiver Flight, 1 stream"), ("quiver_4", "Quiver Flight, 4 streams"),
                            ("quiver_16", "Quiver Flight, 16 streams"),
                            ("deltars", f"delta-rs write_deltalake, zstd {ZSTD_LEVEL}"),
                            ("deltars_l1", f"delta-rs write_deltalake, zstd {ZSTD_LEVEL_FAST}"),
                            ("pyarrow", "pyarrow.parquet.write_table, zstd"),
                            ("discard_1", "(Flight to discard, 1 stream)"),
                            ("quiver_go_1", "(quiver bench, Go client, 1 stream)"),
                            ("quiver_all_1", "Quiver, all-features table, 1 str."),
                            ("quiver_dbp_1", "Quiver, delta_binary_packed ints, 1")):
            m = a[name]["median_rows_per_s"]
            runs = ", ".join(fmt_rate(x) for x in a[name]["rows_per_s"])
            size = f"  {a[name]['parquet_bytes'] / 2**20:5.1f} MiB" if "parquet_bytes" in a[name] else " " * 11
            print(f"{label:<34}{fmt_rate(m):>15}  {runs:<46}{m / d:>7.2f}x{m / p:>10.2f}x{size}"
                  f"  {a[name]['median_cpu_seconds']:.2f} CPU s")
        sizes = {k: a[k]["parquet_bytes"] for k in ("quiver_1", "deltars", "deltars_l1")}
        print(f"data files: Quiver {sizes['quiver_1'] / sizes['deltars']:.3f}x delta-rs zstd {ZSTD_LEVEL}'s bytes, "
              f"{sizes['quiver_1'] / sizes['deltars_l1']:.3f}x zstd {ZSTD_LEVEL_FAST}'s (goal within 5%)")
        if raw := a.get("raw_encoder"):
            per_m = 1e6 / res["rows"]
            enc = raw["median_cpu_seconds"] * per_m
            print(f"\nServer CPU seconds per million rows (raw encoder, 1 stream: {enc:.3f}; goal <= 1.1x at 4 and 16)")
            one = a["quiver_1"]["median_server_cpu_seconds"] * per_m
            for s in STREAMS:
                c = a[f"quiver_{s}"]["median_server_cpu_seconds"] * per_m
                print(f"  {s:>2} stream{'s' if s > 1 else ' '}  {c:.3f}  {c / enc:.2f}x the raw encoder, "
                      f"{c / one:.2f}x the server at 1 stream")
    if u := res.get("upsert"):
        d = [u["deltars"][k]["median_rows_per_s"] for k in ("first", "second")]
        print(f"\nUpsert, {res['changelog_rows']:,} changelog rows into {res['rows']:,} "
              f"(load {u['load'][0]:.1f}-{u['load'][1]:.1f})")
        print(f"{'target':<34}{'#1 rows/s':>11}{'#2 rows/s':>11}{'vs delta-rs #1/#2':>20}  DVs  runs #1 | #2")
        for name, label in (("quiver", "Quiver upsert, deletion vectors"),
                            ("quiver_all", "Quiver upsert, all-features table"), ("deltars", "delta-rs merge"),
                            ("spark", "Spark MERGE INTO, local[2]")):
            if name not in u:
                continue
            m = [u[name][k]["median_rows_per_s"] for k in ("first", "second")]
            runs = " | ".join(", ".join(fmt_rate(x) for x in u[name][k]["rows_per_s"]) for k in ("first", "second"))
            ratio = f"{m[0] / d[0]:.2f}x / {m[1] / d[1]:.2f}x"
            dv = "yes" if u[name]["deletion_vectors_written"] else "no"
            print(f"{label:<34}{fmt_rate(m[0]):>11}{fmt_rate(m[1]):>11}{ratio:>20}  {dv:<4} {runs}")
        q, qa = u["quiver"], u["quiver_all"]
        print("all-features table vs plain table (goal >= 0.9x): upsert #1 "
              f"{qa['first']['median_rows_per_s'] / q['first']['median_rows_per_s']:.2f}x, #2 "
              f"{qa['second']['median_rows_per_s'] / q['second']['median_rows_per_s']:.2f}x")
    if a := res.get("append"):
        print("all-features table vs plain table (goal >= 0.9x): append, 1 stream "
              f"{a['quiver_all_1']['median_rows_per_s'] / a['quiver_1']['median_rows_per_s']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
