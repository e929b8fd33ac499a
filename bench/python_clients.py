"""Python clients against Quiver, same run, same machine.

    make bench-python                      # builds bin/quiver and the baseline, ensures .venv
    .venv/bin/python bench/python_clients.py --quiver bin/quiver --baseline bin/flightbaseline

The standard workload (bench/delta_vs_reference.py's generator: int64 id,
timestamp[us, UTC] ts, int64 user_id, float64 amount and score, utf8 name and
category, bool active), ROWS rows (default 2,000,000) in batches of 65,536
rows, generated before timing, sent by 1 and 4 client threads (the batches
dealt round-robin, each thread its own connection, made before the clock
starts, and one stream):

  - pyarrow.flight DoPut -> Quiver's discard endpoint, against the same DoPut
    -> the bare arrow-go Flight server of bench/ (bin/flightbaseline, which
    decodes and drops the batches and answers the same acks): what Quiver
    costs over Flight itself;
  - ADBC `adbc_ingest` (adbc-driver-flightsql, autocommit) -> Quiver's
    discard endpoint, against pyarrow.flight DoPut -> the same endpoint: what
    the Flight SQL path costs over Quiver's own;
  - for reference, the quiver package's Client.put -> the same endpoint.

Each timing ends when every stream's final ack is in. Targets alternate their
order from run to run; the report gives the median rows/s of RUNS runs and
the ratios of the medians (the goal is >= 0.9 for both comparisons).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from delta_vs_reference import BATCH, SCHEMA, batched, fmt_rate, load, proc_cpu, rows, summary, timed  # noqa: E402
from helpers import Client, Quiver  # noqa: E402  (delta_vs_reference put interop/ on sys.path)


def deal(table: pa.Table, streams: int) -> list[pa.Table]:
    """table's batches dealt round-robin to streams tables."""
    batches = table.to_batches()
    return [pa.Table.from_batches(batches[i::streams], SCHEMA) for i in range(streams)]


def in_threads(parts: list[pa.Table], send: Callable[[int, pa.Table], None]) -> None:
    """send(i, part) for every part, each on its own thread; re-raises the
    first error."""
    errors: list[BaseException] = []

    def run(i: int, part: pa.Table) -> None:
        try:
            send(i, part)
        except BaseException as e:  # reported after join
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i, p)) for i, p in enumerate(parts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


# Each client kind: connect(addr) -> (send(endpoint, part), close()). The
# connections are made before the timing starts.
Sender = tuple[Callable[[str, pa.Table], None], Callable[[], None]]


def pyarrow_client(addr: str) -> Sender:
    c = Client(addr)  # the interop suite's pyarrow.flight client
    return (lambda ep, part: c.put(ep, part, chunk=BATCH)), c.close


def adbc_client(addr: str) -> Sender:
    import adbc_driver_flightsql.dbapi as flight_sql

    conn = flight_sql.connect(f"grpc://{addr}", autocommit=True)

    def send(ep: str, part: pa.Table) -> None:
        with conn.cursor() as cur:
            assert cur.adbc_ingest(ep, part, mode="append") == part.num_rows

    return send, conn.close


def package_client(addr: str) -> Sender:
    import quiver

    c = quiver.connect(f"grpc://{addr}")

    def send(ep: str, part: pa.Table) -> None:
        assert c.put(ep, part).rows == part.num_rows

    return send, c.close


def measure(connect: Callable[[str], Sender], addr: str, server_pid: int, table: pa.Table, streams: int) -> tuple[float, float, float]:
    """Wall seconds to send table's batches dealt to streams threads, each
    on a connection made before the clock starts, and the CPU seconds the
    server process and this client process (every thread, the ADBC
    driver's included) spent meanwhile (less sensitive than wall time to
    what else runs on the machine)."""
    parts = deal(table, streams)
    senders = [connect(addr) for _ in range(streams)]
    try:
        cpu, client = proc_cpu(server_pid), proc_cpu(os.getpid())
        secs = timed(lambda: in_threads(parts, lambda i, part: senders[i][0]("devnull", part)))
        return secs, proc_cpu(server_pid) - cpu, proc_cpu(os.getpid()) - client
    finally:
        for _, close in senders:
            close()


def start_baseline(binary: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([str(binary)], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("listening "):
        proc.kill()
        raise RuntimeError(f"{binary}: expected 'listening ADDR', got {line!r}")
    return proc, line.split()[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quiver", type=Path, required=True, help="bin/quiver")
    p.add_argument("--baseline", type=Path, required=True, help="bin/flightbaseline")
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--streams", default="1,4")
    p.add_argument("--json", type=Path, help="also write the report as JSON")
    args = p.parse_args()

    table = batched(rows(pa.array(range(args.rows), pa.int64()), seed=1))
    work = Path(tempfile.mkdtemp(prefix="quiver-bench-python-"))
    srv = Quiver(args.quiver, work, [{"name": "devnull", "sink": "discard"}])
    base, base_addr = start_baseline(args.baseline)
    targets: dict[str, tuple[Callable[[str], Sender], str, int]] = {
        "pyarrow.flight -> bare Flight": (pyarrow_client, base_addr, base.pid),
        "pyarrow.flight -> Quiver": (pyarrow_client, srv.flight_addr, srv.proc.pid),
        "ADBC adbc_ingest -> Quiver": (adbc_client, srv.flight_addr, srv.proc.pid),
        "quiver package -> Quiver": (package_client, srv.flight_addr, srv.proc.pid),
    }
    report: dict[str, Any] = {"rows": args.rows, "batch_rows": BATCH, "runs": args.runs, "results": {}}
    try:
        for streams in [int(s) for s in args.streams.split(",")]:
            secs: dict[str, list[float]] = {name: [] for name in targets}
            cpu: dict[str, list[float]] = {name: [] for name in targets}
            client_cpu: dict[str, list[float]] = {name: [] for name in targets}
            loads = [load()]
            for run in range(args.runs):
                names = list(targets)
                if run % 2:
                    names.reverse()
                for name in names:
                    wall, server_cpu, client = measure(*targets[name], table, streams)
                    secs[name].append(wall)
                    cpu[name].append(server_cpu)
                    client_cpu[name].append(client)
                loads.append(load())
            res: dict[str, Any] = {name: {**summary(args.rows, s), "server_cpu_s": cpu[name],
                                          "median_server_cpu_s": statistics.median(cpu[name]),
                                          "median_client_cpu_s": statistics.median(client_cpu[name])}
                                   for name, s in secs.items()}
            res["load_avg"] = loads
            med = {name: res[name]["median_rows_per_s"] for name in targets}
            res["ratio quiver/bare"] = med["pyarrow.flight -> Quiver"] / med["pyarrow.flight -> bare Flight"]
            res["ratio adbc/doput"] = med["ADBC adbc_ingest -> Quiver"] / med["pyarrow.flight -> Quiver"]
            report["results"][str(streams)] = res
            print(f"{streams} stream(s), {args.rows:,} rows, median of {args.runs}, load avg {min(loads):.1f}-{max(loads):.1f}:")
            for name, r in med.items():
                print(f"  {name:32s} {fmt_rate(r)} rows/s, server CPU {res[name]['median_server_cpu_s']:.2f} s, "
                      f"client CPU {res[name]['median_client_cpu_s']:.2f} s")
            print(f"  Quiver / bare Flight: {res['ratio quiver/bare']:.2f}   ADBC / DoPut: {res['ratio adbc/doput']:.2f}")
    finally:
        srv.stop()
        base.terminate()
        base.wait()
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
