"""Quiver's Delta optimize against delta-rs and Spark compaction, same run, same machine.

    make bench-optimize                        # builds bin/quiver, ensures .venv, runs this
    .venv/bin/python bench/optimize_vs_reference.py --runs 3 --no-spark

One Delta table of FILES small files (default 1,000) of ROWS_PER_FILE rows
(default 2,000) of the standard workload's schema (bench/delta_vs_reference.py),
written with pyarrow (zstd) and committed as one version, is copied once per
engine and run; each copy is compacted into 128 MiB files by
  - Quiver: the `optimize` action of a `quiver serve` (bin/quiver, a separate
    process) whose delta endpoint points at the copy;
  - delta-rs `DeltaTable.optimize.compact(target_size=128 MiB)` in process;
  - Spark `OPTIMIZE delta.<path>` on local[2] (maxFileSize 128 MiB), after an
    untimed OPTIMIZE of a small table warms the JVM (--no-spark skips it).
Engines alternate their order from run to run. Every compacted copy is read
back with delta-rs (count, distinct ids, sum(amount)) and must agree with the
original; the report gives seconds per run, medians, the ratios of the
medians (rows/s relative to Quiver) and the load average. Lance compaction
against pylance is not measured (Quiver has no Lance optimize yet).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "interop"))
from delta_vs_reference import rows, spark_session, table_digest  # noqa: E402
from helpers import REPO, Quiver  # noqa: E402

TARGET = 128 << 20
DELTA_TYPES = {pa.int64(): "long", pa.float64(): "double", pa.string(): "string", pa.bool_(): "boolean",
               pa.timestamp("us", tz="UTC"): "timestamp"}


def small_file_table(path: Path, files: int, per_file: int) -> None:
    """A Delta table (protocol 1/2, one commit) of files Parquet files of
    per_file rows each, ids 0..files*per_file."""
    (path / "_delta_log").mkdir(parents=True)
    adds = []
    schema = None
    for i in range(files):
        t = rows(pa.array(range(i * per_file, (i + 1) * per_file), pa.int64()), seed=i)
        schema = t.schema
        name = f"part-{i:05d}-{uuid.uuid4()}-c000.zstd.parquet"
        pq.write_table(t, path / name, compression="zstd")
        adds.append({"add": {"path": name, "partitionValues": {}, "size": (path / name).stat().st_size,
                             "modificationTime": int(time.time() * 1000), "dataChange": True,
                             "stats": json.dumps({"numRecords": per_file})}})
    assert schema is not None
    fields = [{"name": f.name, "type": DELTA_TYPES[f.type], "nullable": True, "metadata": {}} for f in schema]
    now = int(time.time() * 1000)
    actions = [
        {"commitInfo": {"timestamp": now, "operation": "WRITE", "operationParameters": {"mode": "Append"}}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps({"type": "struct", "fields": fields}),
                      "partitionColumns": [], "configuration": {}, "createdTime": now}},
        *adds,
    ]
    (path / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quiver", default=str(REPO / "bin" / "quiver"), help="the quiver binary")
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--rows-per-file", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="quiver-optimize-bench-"))
    print(f"work folder {work}; load average {os.getloadavg()}", flush=True)
    engines = ["quiver", "deltars"] + ([] if args.no_spark else ["spark"])
    t = time.perf_counter()
    small_file_table(work / "original", args.files, args.rows_per_file)
    want = table_digest(work / "original")
    for r in range(args.runs):
        for e in engines:
            shutil.copytree(work / "original", work / f"{e}_{r}")
    print(f"wrote {args.files} files of {args.rows_per_file} rows and {args.runs * len(engines)} copies "
          f"in {time.perf_counter() - t:.1f}s", flush=True)

    server = Quiver(Path(args.quiver), work / "server", [
        {"name": f"quiver_{r}", "sink": "delta", "delta": {"table_uri": f"file://{work / f'quiver_{r}'}"},
         "maintenance": {"target_file_bytes": TARGET}} for r in range(args.runs)])
    spark = None
    results: dict[str, Any] = {"files": args.files, "rows_per_file": args.rows_per_file, "runs": args.runs,
                               "load_start": os.getloadavg(), "cpus": os.cpu_count(),
                               "seconds": {e: [] for e in engines}}
    try:
        if "spark" in engines:
            spark = spark_session(work / "spark")
            spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(TARGET))
            small_file_table(work / "spark_warm", 20, 100)
            spark.sql(f"OPTIMIZE delta.`{work / 'spark_warm'}`").collect()
        from deltalake import DeltaTable

        run = {
            "quiver": lambda r: server.client().action("optimize", endpoint=f"quiver_{r}"),
            "deltars": lambda r: DeltaTable(str(work / f"deltars_{r}")).optimize.compact(target_size=TARGET),
            "spark": lambda r: spark.sql(f"OPTIMIZE delta.`{work / f'spark_{r}'}`").collect(),
        }
        for r in range(args.runs):
            order = engines[r % len(engines):] + engines[:r % len(engines)]
            for e in order:
                secs = timed(lambda: run[e](r))
                results["seconds"][e].append(secs)
                got = table_digest(work / f"{e}_{r}")
                assert got == want, f"{e} run {r}: {got}, the original has {want}"
                print(f"run {r} {e}: {secs:.2f}s (load {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        server.stop()
        if spark is not None:
            spark.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    results["load_end"] = os.getloadavg()
    report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


def report(res: dict[str, Any]) -> None:
    n = res["files"] * res["rows_per_file"]
    med = {e: statistics.median(s) for e, s in res["seconds"].items()}
    print(f"\nOptimize {res['files']:,} files x {res['rows_per_file']:,} rows ({n:,} rows) into 128 MiB files; "
          f"load average at start {res['load_start']}, at end {res['load_end']}; {res['cpus']} CPUs; "
          f"medians of {res['runs']} alternating runs")
    print(f"{'engine':<12}{'median s':>10}{'rows/s':>12}  {'runs (s)':<30}{'Quiver vs it':>13}")
    for e, s in res["seconds"].items():
        runs = ", ".join(f"{x:.2f}" for x in s)
        print(f"{e:<12}{med[e]:>10.2f}{n / med[e]:>12,.0f}  {runs:<30}{med[e] / med['quiver']:>12.2f}x")


if __name__ == "__main__":
    sys.exit(main())
