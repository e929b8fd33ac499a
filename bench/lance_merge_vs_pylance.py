"""Quiver's Lance merge_insert against pylance's, on a dataset of Lance file
format 2.2 (pylance's default), same run, same machine.

    make bench-lance-merge                              # builds bin/quiver, ensures .venv, runs this
    .venv/bin/python bench/lance_merge_vs_pylance.py --runs 3 --storage 2.2

pylance writes a ROWS-row dataset (default 2,000,000) of the standard
workload's schema (the columns of bench/delta_vs_reference.py) in the given
data storage version, copied for Quiver. Then MERGES changelogs of
MERGE_ROWS rows (default 200,000: half existing ids spread over the table with
new values, half new ids; each changelog its own ids) are merged into each
copy, on id, update all / insert all:
  - Quiver: a lance merge_insert endpoint of `quiver serve` (bin/quiver), one
    auto-commit stream per changelog; the first merge finds the key index
    cold (it scans, and the commit builds the index), the later ones warm;
  - pylance: `dataset.merge_insert("id").when_matched_update_all()
    .when_not_matched_insert_all().execute(changelog)` in process, without a
    scalar index (the reference a user without one gets).
Each engine runs its merges back to back (a merge pays for what the previous
one left to do, as in a pipeline), the engines' order alternating from run to
run. After every run both datasets are read
back by pylance (count, distinct ids, sum(amount)) and must agree. The report
gives the first merge and the median of the later ones, per engine, with
Quiver's ratio; medians over RUNS runs.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "interop"))
from delta_vs_reference import batched, changelog, rows  # noqa: E402
from helpers import REPO, Quiver  # noqa: E402


def digest(path: Path) -> tuple[int, int, float]:
    import lance

    t = lance.dataset(str(path)).to_table(columns=["id", "amount"])
    return t.num_rows, pc.count_distinct(t["id"]).as_py(), round(pc.sum(t["amount"]).as_py(), 3)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quiver", default=str(REPO / "bin" / "quiver"), help="the quiver binary")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--merge-rows", type=int, default=200_000)
    ap.add_argument("--merges", type=int, default=4, help="merges per run: the first cold, the others warm")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--storage", default="2.2", help="the dataset's data storage version")
    args = ap.parse_args()
    import lance

    work = Path(tempfile.mkdtemp(prefix="quiver-lance-merge-bench-"))
    base = batched(rows(pa.array(range(args.rows), pa.int64()), seed=1))
    cls = [changelog(args.rows, args.merge_rows, args.rows + i * args.merge_rows, offset=i * 7, seed=10 + i)
           for i in range(args.merges)]
    endpoints = [{"name": f"merge_r{r}", "sink": "lance", "lance": {
        "dataset_uri": f"file://{work}/quiver_r{r}.lance", "mode": "merge_insert", "on": ["id"],
        "when_matched": "update_all", "when_not_matched": "insert_all"}} for r in range(args.runs)]
    for r in range(args.runs):
        lance.write_dataset(base, str(work / f"pylance_r{r}.lance"), data_storage_version=args.storage)
        shutil.copytree(work / f"pylance_r{r}.lance", work / f"quiver_r{r}.lance")
    server = Quiver(Path(args.quiver), work / "server", endpoints)
    secs: dict[str, list[list[float]]] = {"quiver": [], "pylance": []}
    loads = [os.getloadavg()[0]]
    try:
        client = server.client()
        for r in range(args.runs):
            runs: dict[str, list[float]] = {e: [] for e in secs}
            order = ["quiver", "pylance"] if r % 2 == 0 else ["pylance", "quiver"]
            for e in order:
                for i, cl in enumerate(cls):
                    os.sync()  # earlier runs' unsynced files are not written during this one
                    start = time.perf_counter()
                    if e == "quiver":
                        client.put(f"merge_r{r}", cl, chunk=65_536)
                    else:
                        ds = lance.dataset(str(work / f"pylance_r{r}.lance"))
                        ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(cl)
                    runs[e].append(time.perf_counter() - start)
                    print(f"run {r} merge {i + 1} {e}: {cl.num_rows / runs[e][-1] / 1e3:.0f} k rows/s", flush=True)
            for e in secs:
                secs[e].append(runs[e])
            got = {e: digest(work / f"{e}_r{r}.lance") for e in secs}
            assert got["quiver"] == got["pylance"], f"run {r}: the datasets disagree: {got}"
            loads.append(os.getloadavg()[0])
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)

    n = args.merge_rows
    print(f"\nLance merge_insert of {n:,} rows into {args.rows:,} (storage {args.storage}), "
          f"medians of {args.runs} runs, load {min(loads):.1f}-{max(loads):.1f}")
    print(f"{'engine':10} {'first rows/s':>14} {'later rows/s':>14}")
    med = {}
    for e, runs in secs.items():
        first = statistics.median(run[0] for run in runs)
        later = statistics.median(statistics.median(run[1:]) for run in runs) if args.merges > 1 else first
        med[e] = (n / first, n / later)
        print(f"{e:10} {n / first:>14,.0f} {n / later:>14,.0f}")
    print(f"Quiver vs pylance: first {med['quiver'][0] / med['pylance'][0]:.2f}x, "
          f"later {med['quiver'][1] / med['pylance'][1]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
