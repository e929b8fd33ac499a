"""Quiver's optimize against the reference compactions, same run, same machine.

    make bench-optimize                        # builds bin/quiver, ensures .venv, runs this
    .venv/bin/python bench/optimize_vs_reference.py --runs 3 --no-spark
    .venv/bin/python bench/optimize_vs_reference.py --only lance

Delta: one Delta table of FILES small files (default 1,000) of ROWS_PER_FILE
rows (default 2,000) of the standard workload's schema
(bench/delta_vs_reference.py), written with pyarrow (zstd) and committed as
one version, is copied once per engine and run; each copy is compacted into
128 MiB files by
  - Quiver: the `optimize` action of a `quiver serve` (bin/quiver, a separate
    process) whose delta endpoint points at the copy;
  - delta-rs `DeltaTable.optimize.compact(target_size=128 MiB)` in process;
  - Spark `OPTIMIZE delta.<path>` on local[2] (maxFileSize 128 MiB), after an
    untimed OPTIMIZE of a small table warms the JVM (--no-spark skips it).
Every compacted copy is read back with delta-rs (count, distinct ids,
sum(amount)) and must agree with the original.

Lance: one Lance dataset of LANCE_FRAGMENTS fragments (default 200) of
LANCE_ROWS rows (default 10,000) of the same schema, written by pylance in
one version (its default file format), is copied likewise and compacted by
  - Quiver: the `optimize` action on a lance endpoint (default target:
    1Mi rows or 128 MiB per fragment);
  - pylance `dataset.optimize.compact_files()` in process (its defaults:
    1Mi rows per fragment).
Every compacted copy is read back with pylance (count, distinct ids,
sum(amount)) and must agree with the original.

Engines alternate their order from run to run. The report gives seconds per
run, medians, the ratios of the medians (rows/s relative to Quiver) and the
load average.
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


def lance_dataset(path: Path, fragments: int, per_fragment: int) -> None:
    """A Lance dataset (one version, pylance's default file format) of
    fragments fragments of per_fragment rows each."""
    import lance

    t = rows(pa.array(range(fragments * per_fragment), pa.int64()), seed=7)
    lance.write_dataset(t, str(path), max_rows_per_file=per_fragment, max_rows_per_group=per_fragment)
    got = len(lance.dataset(str(path)).get_fragments())
    assert got == fragments, f"pylance wrote {got} fragments, want {fragments}"


def lance_digest(path: Path) -> tuple[int, int, float]:
    """count, distinct ids and sum(amount) as pylance reads the dataset."""
    import lance
    import pyarrow.compute as pc

    t = lance.dataset(str(path)).to_table(columns=["id", "amount"])
    return t.num_rows, pc.count_distinct(t["id"]).as_py(), round(pc.sum(t["amount"]).as_py(), 3)


def lance_fragments(path: Path) -> int:
    import lance

    return len(lance.dataset(str(path)).get_fragments())


class Scenario:
    """One table format's comparison: the original table at work/<name>,
    a copy per engine and run at work/<name>_<engine>_<run>."""

    def __init__(self, name: str, engines: list[str], rows: int, digest: Callable[[Path], Any]) -> None:
        self.name, self.engines, self.rows, self.digest = name, engines, rows, digest

    def copy(self, work: Path, runs: int) -> None:
        for r in range(runs):
            for e in self.engines:
                shutil.copytree(work / self.name, self.path(work, e, r))

    def path(self, work: Path, engine: str, run: int) -> Path:
        return work / f"{self.name}_{engine}_{run}"

    def measure(self, work: Path, runs: int, run: dict[str, Callable[[int], Any]], results: dict[str, Any]) -> None:
        want = self.digest(work / self.name)
        secs_of = results.setdefault(self.name, {"rows": self.rows, "seconds": {e: [] for e in self.engines}})["seconds"]
        for r in range(runs):
            order = self.engines[r % len(self.engines):] + self.engines[:r % len(self.engines)]
            for e in order:
                os.sync()  # earlier runs' unsynced files are not written during this one
                secs = timed(lambda: run[e](r))
                secs_of[e].append(secs)
                got = self.digest(self.path(work, e, r))
                assert got == want, f"{self.name} {e} run {r}: {got}, the original has {want}"
                print(f"{self.name} run {r} {e}: {secs:.2f}s (load {os.getloadavg()[0]:.1f})", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quiver", default=str(REPO / "bin" / "quiver"), help="the quiver binary")
    ap.add_argument("--only", choices=["delta", "lance"], help="run one format's comparison")
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--rows-per-file", type=int, default=2000)
    ap.add_argument("--lance-fragments", type=int, default=200)
    ap.add_argument("--lance-rows", type=int, default=10000, help="rows per Lance fragment")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="quiver-optimize-bench-"))
    print(f"work folder {work}; load average {os.getloadavg()}", flush=True)
    scenarios = []
    if args.only in (None, "delta"):
        scenarios.append(Scenario("delta", ["quiver", "deltars"] + ([] if args.no_spark else ["spark"]),
                                  args.files * args.rows_per_file, table_digest))
    if args.only in (None, "lance"):
        scenarios.append(Scenario("lance", ["quiver", "pylance"], args.lance_fragments * args.lance_rows, lance_digest))
    t = time.perf_counter()
    endpoints = []
    for sc in scenarios:
        if sc.name == "delta":
            small_file_table(work / "delta", args.files, args.rows_per_file)
        else:
            lance_dataset(work / "lance", args.lance_fragments, args.lance_rows)
        sc.copy(work, args.runs)
        endpoints += [{"name": f"{sc.name}_{r}", "sink": sc.name,
                       sc.name: {("table_uri" if sc.name == "delta" else "dataset_uri"): f"file://{sc.path(work, 'quiver', r)}"},
                       "maintenance": {"target_file_bytes": TARGET}} for r in range(args.runs)]
    print(f"wrote the original tables and their copies in {time.perf_counter() - t:.1f}s", flush=True)

    server = Quiver(Path(args.quiver), work / "server", endpoints)
    spark = None
    results: dict[str, Any] = {"files": args.files, "rows_per_file": args.rows_per_file,
                               "lance_fragments": args.lance_fragments, "lance_rows": args.lance_rows,
                               "runs": args.runs, "load_start": os.getloadavg(), "cpus": os.cpu_count()}
    try:
        for sc in scenarios:
            quiver = lambda r, sc=sc: server.client().action("optimize", endpoint=f"{sc.name}_{r}")  # noqa: E731
            if sc.name == "lance":
                import lance

                sc.measure(work, args.runs, {
                    "quiver": quiver,
                    "pylance": lambda r: lance.dataset(str(sc.path(work, "pylance", r))).optimize.compact_files(),
                }, results)
                results["lance"]["fragments"] = {e: lance_fragments(sc.path(work, e, 0)) for e in sc.engines}
                continue
            if "spark" in sc.engines:
                spark = spark_session(work / "spark")
                spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(TARGET))
                small_file_table(work / "spark_warm", 20, 100)
                spark.sql(f"OPTIMIZE delta.`{work / 'spark_warm'}`").collect()
            from deltalake import DeltaTable

            sc.measure(work, args.runs, {
                "quiver": quiver,
                "deltars": lambda r: DeltaTable(str(sc.path(work, "deltars", r))).optimize.compact(target_size=TARGET),
                "spark": lambda r: spark.sql(f"OPTIMIZE delta.`{sc.path(work, 'spark', r)}`").collect(),
            }, results)
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
    print(f"\nLoad average at start {res['load_start']}, at end {res['load_end']}; {res['cpus']} CPUs; "
          f"medians of {res['runs']} alternating runs")
    for name, what in (("delta", f"{res['files']:,} files x {res['rows_per_file']:,} rows into 128 MiB files"),
                       ("lance", f"{res['lance_fragments']:,} fragments x {res['lance_rows']:,} rows")):
        if name not in res:
            continue
        sc = res[name]
        n = sc["rows"]
        med = {e: statistics.median(s) for e, s in sc["seconds"].items()}
        print(f"\n{name.capitalize()}: optimize {what} ({n:,} rows)"
              + (f"; fragments after: {sc['fragments']}" if "fragments" in sc else ""))
        print(f"{'engine':<12}{'median s':>10}{'rows/s':>12}  {'runs (s)':<30}{'Quiver vs it':>13}")
        for e, s in sc["seconds"].items():
            runs = ", ".join(f"{x:.2f}" for x in s)
            print(f"{e:<12}{med[e]:>10.2f}{n / med[e]:>12,.0f}  {runs:<30}{med[e] / med['quiver']:>12.2f}x")


if __name__ == "__main__":
    sys.exit(main())
