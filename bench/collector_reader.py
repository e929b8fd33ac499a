"""Run quiverbench's collector scenario while delta-rs polls the table.

The collector scenario (bench/scenario/collector) writes long-lived streams of
small batches into a Delta table; a reader such as a dashboard or a
downstream job polls that table meanwhile. This script starts the scenario
on a folder of its own and, while it runs, opens the continuous streams'
table with delta-rs (deltalake) every --poll seconds, counting the rows of
each version it sees: a reader sees the rows within about a commit
interval, never a version it cannot read.

    .venv/bin/python bench/collector_reader.py --quiverbench bin/quiverbench -- --duration 20s

Arguments after -- go to quiverbench. `make bench-collector` runs it.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quiverbench", required=True, help="path of the quiverbench binary")
    ap.add_argument("--poll", type=float, default=0.5, help="seconds between two reads of the table")
    ap.add_argument("args", nargs="*", help="quiverbench's arguments (after --)")
    a = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="collector-reader-"))
    table = folder / "stream"
    try:
        bench = subprocess.Popen([a.quiverbench, "--scenario", "collector", "--dir", str(folder), *a.args])
        reads = failures = 0
        versions: list[tuple[float, int, int]] = []  # (seconds since start, version, rows)
        start = time.monotonic()
        while bench.poll() is None:
            time.sleep(a.poll)
            if not (table / "_delta_log").exists():
                continue
            try:
                dt = DeltaTable(str(table))
                rows = sum(pa.table(dt.get_add_actions(flatten=True)).column("num_records").to_pylist())
                reads += 1
                if not versions or versions[-1][1] != dt.version():
                    versions.append((time.monotonic() - start, dt.version(), rows))
            except Exception as e:  # a read that fails is what this checks for
                failures += 1
                print(f"delta-rs could not read the table: {e}", file=sys.stderr)
        if bench.returncode != 0:
            return bench.returncode
        print(f"delta-rs polling the continuous streams' table: {reads} reads, {failures} failed, {len(versions)} distinct versions seen")
        for t, v, r in versions[-3:]:
            print(f"  at {t:6.1f} s: version {v}, {r} rows")
        return 1 if failures else 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
