"""Quiver's Lance append against pylance's write_dataset, from a Python
user's seat: the same Arrow table written by pylance in process, or sent
through pyarrow.flight to `quiver serve`. Same run, same machine.

    make bench-lance-append                               # builds bin/quiver, ensures .venv, runs this
    .venv/bin/python bench/lance_append_vs_pylance.py --runs 5 --streams 1,4 --storage 2.2

A table of ROWS rows (default 2,000,000) in 65,536-row batches, generated
before timing, is written STREAMS ways at once. --data picks its columns:
`cardinality` (the default): int64 id, timestamp[us, UTC], a string of 16
values, a string of 20,000 values, float64, int32, bool; `standard`: the
standard workload of bench/delta_vs_reference.py (int64 id, timestamp,
int64, two float64, a random and a 16-value string, bool).
  - Quiver: STREAMS concurrent auto-commit puts (one connection each, the
    table's batches dealt round-robin) into STREAMS lance append endpoints
    of one `quiver serve` (bin/quiver), each a new dataset, timed until every
    commit's ack;
  - pylance: `lance.write_dataset` of the same parts into STREAMS new
    datasets from STREAMS threads, in process.
Before the timed runs of each writer count, each engine writes the table
WARMUP times (default 8, untimed), so that both are measured warm, as a
long-running server is: pylance's thread pools and allocator, and the
server's heap grown to its working size. A fresh server's heap grows over
its first 6 to 15 runs of 4 streams (the collector lets it reach five
times the live data before a collection, and the live data at each
collection differs); a run that grows it faults in 3,000 to 60,000 new
pages, at about 5 us each on a VM (30,000 add a third to a run's CPU).
Every run prints its page faults.
Engines alternate their order from run to run. Every dataset is read back
by pylance (count, distinct ids, sum(amount)) and must hold its rows. The
report gives medians over RUNS runs: rows/s, Quiver / pylance, bytes on disk
(Quiver / pylance, same file format) and the quiver process's CPU seconds
per million rows (user+system, from /proc) against the whole benchmark
process's for pylance.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "interop"))
from delta_vs_reference import batched, proc_cpu, proc_faults, rows  # noqa: E402
from helpers import REPO, Client, Quiver  # noqa: E402


def cardinality(n: int, seed: int) -> pa.Table:
    """n rows: ids, timestamps, strings of low and medium cardinality,
    float64, int32 and bool, random from seed."""
    rnd = random.Random(seed)

    def uniform() -> pa.Array:
        return pc.random(n, initializer=rnd.getrandbits(63))

    def pick(values: list[str]) -> pa.Array:
        idx = pc.cast(pc.floor(pc.multiply(uniform(), len(values))), pa.int32())
        return pc.take(pa.array(values, pa.string()), idx)

    ids = pa.array(range(n), pa.int64())
    low = [f"category-{i}" for i in range(16)]
    medium = [f"user-{rnd.getrandbits(40):010x}" for _ in range(20_000)]
    return pa.table({
        "id": ids,
        "ts": pc.cast(pc.add(pc.multiply(ids, 1000), 1_764_700_000_000_000), pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        "category": pick(low),
        "user": pick(medium),
        "amount": pc.multiply(uniform(), 1000.0),
        "quantity": pc.cast(pc.floor(pc.multiply(uniform(), 1000)), pa.int32()),
        "active": pc.less(uniform(), 0.5),
    })


def check(path: Path, want: pa.Table) -> None:
    import lance

    t = lance.dataset(str(path)).to_table(columns=["id", "amount"])
    got = (t.num_rows, pc.count_distinct(t["id"]).as_py(), round(pc.sum(t["amount"]).as_py(), 3))
    exp = (want.num_rows, pc.count_distinct(want["id"]).as_py(), round(pc.sum(want["amount"]).as_py(), 3))
    assert got == exp, f"{path}: {got}, want {exp}"


def size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def own_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def parts(table: pa.Table, n: int) -> list[pa.Table]:
    """table's batches dealt round-robin into n tables."""
    batches = table.to_batches()
    return [pa.Table.from_batches(batches[i::n], table.schema) for i in range(n)]


def concurrently(fns: list) -> float:
    """Runs fns on threads at once; returns the wall time until all ended."""
    errors: list[BaseException] = []

    def run(fn) -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(fn,)) for fn in fns]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quiver", default=str(REPO / "bin" / "quiver"), help="the quiver binary")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=8, help="untimed runs per engine before the timed ones")
    ap.add_argument("--streams", default="1,4", help="comma list of concurrent writers")
    ap.add_argument("--storage", default="2.2", help="the Lance data storage version (2.1 or 2.2)")
    ap.add_argument("--data", default="cardinality", choices=["cardinality", "standard"], help="the table's columns")
    args = ap.parse_args()
    if args.warmup < 0 or args.runs < 1:
        ap.error("--warmup must be 0 or more and --runs 1 or more")
    import lance

    streams = [int(s) for s in args.streams.split(",")]
    work = Path(tempfile.mkdtemp(prefix="quiver-lance-append-bench-"))
    if args.data == "standard":
        table = batched(rows(pa.array(range(args.rows), pa.int64()), seed=1))
    else:
        t = cardinality(args.rows, seed=1).combine_chunks()
        table = pa.Table.from_batches(t.to_batches(max_chunksize=65_536), t.schema)
    runs = args.warmup + args.runs  # the first ones warm up
    names = [f"la{s}_r{r}_{i}" for s in streams for r in range(runs) for i in range(s)]
    endpoints = [{"name": n, "sink": "lance", "lance": {
        "dataset_uri": f"file://{work}/quiver/{n}.lance", "mode": "append",
        "data_storage_version": args.storage}} for n in names]
    server = Quiver(Path(args.quiver), work / "server", endpoints)
    loads = [os.getloadavg()[0]]
    report = []
    clients: list[Client] = []
    try:
        # One connection per stream, as separate collectors would have (the
        # server's cached client would carry every stream on one).
        for _ in range(max(streams)):
            clients.append(Client(server.flight_addr))
        for s in streams:
            split = parts(table, s)
            secs: dict[str, list[float]] = {"quiver": [], "pylance": []}
            cpu: dict[str, list[float]] = {"quiver": [], "pylance": []}
            disk: dict[str, list[int]] = {"quiver": [], "pylance": []}
            for r in range(runs):
                order = ["quiver", "pylance"] if (r - args.warmup) % 2 == 0 else ["pylance", "quiver"]
                for e in order:
                    dirs = [work / e / f"la{s}_r{r}_{i}.lance" for i in range(s)]
                    os.sync()  # the previous run's unsynced files are not written during this one
                    if e == "quiver":
                        before, faults = proc_cpu(server.proc.pid), proc_faults(server.proc.pid)
                        wall = concurrently([
                            (lambda c=clients[i], ep=f"la{s}_r{r}_{i}", t=split[i]: c.put(ep, t))
                            for i in range(s)])
                        used, faults = proc_cpu(server.proc.pid) - before, proc_faults(server.proc.pid) - faults
                    else:
                        before, faults = own_cpu(), own_faults()
                        wall = concurrently([
                            (lambda d=dirs[i], t=split[i]: lance.write_dataset(t, str(d), data_storage_version=args.storage))
                            for i in range(s)])
                        used, faults = own_cpu() - before, own_faults() - faults
                    for d, t in zip(dirs, split):
                        check(d, t)
                    if r < args.warmup:
                        print(f"streams {s} warm-up {e}: {args.rows / wall / 1e6:.2f} M rows/s, {faults:,} page faults", flush=True)
                        continue
                    secs[e].append(wall)
                    cpu[e].append(used)
                    disk[e].append(sum(size(d) for d in dirs))
                    print(f"streams {s} run {r - args.warmup} {e}: {args.rows / wall / 1e6:.2f} M rows/s, "
                          f"{used / args.rows * 1e6:.2f} CPU s per M rows, {faults:,} page faults", flush=True)
                if r >= args.warmup:
                    loads.append(os.getloadavg()[0])
            med = {e: statistics.median(v) for e, v in secs.items()}
            report.append((s, med, {e: statistics.median(v) for e, v in cpu.items()},
                           {e: statistics.median(v) for e, v in disk.items()}))
    finally:
        for c in clients:
            with contextlib.suppress(Exception):
                c.close()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)

    print(f"\nLance append of {args.rows:,} rows ({args.data}, storage {args.storage}), medians of {args.runs} runs, "
          f"load {min(loads):.1f}-{max(loads):.1f}")
    print(f"{'streams':>7} {'quiver rows/s':>14} {'pylance rows/s':>15} {'ratio':>6} "
          f"{'bytes ratio':>11} {'quiver CPU s/M':>15} {'pylance CPU s/M':>16}")
    for s, med, cpu, disk in report:
        m = args.rows / 1e6
        print(f"{s:>7} {args.rows / med['quiver']:>14,.0f} {args.rows / med['pylance']:>15,.0f} "
              f"{med['pylance'] / med['quiver']:>5.2f}x {disk['quiver'] / disk['pylance']:>10.3f}x "
              f"{cpu['quiver'] / m:>15.2f} {cpu['pylance'] / m:>16.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
