"""Exactly-once from Spark Structured Streaming (issue #38): a real
streaming query (file source, one Parquet file per micro-batch,
foreachBatch = quiver.spark.foreach_batch_writer) writes every batch to a
Delta append endpoint and a Delta upsert endpoint (merge key id, deletion
vectors) in one transaction per batch, and is killed -9 at every point of
a batch, as is `quiver serve`:

  run 1: the driver dies after its puts, before precommit (batch 1)
  run 2: the driver dies after precommit, before commit (batch 2)
  run 3: the driver dies after Quiver's commit, before Spark records the
         batch (batch 3: the rerun is a replay)
  run 4: Quiver dies with batch 4's transaction open (then the driver)
  run 5: Quiver dies with batch 5 precommitted (then the driver)
  run 6: Quiver dies in batch 5's commit, once decided (QUIVER_TEST_CRASH);
         its restart finishes the commit
  run 7: the driver dies after batch 6's puts and its transaction expires
         (txn.ttl 5s) before the rerun
  run 8: the query finishes (batch 6 is empty: its epoch still commits)

Each run restarts the query from its checkpoint (and Quiver on its
journal). After each one, both tables hold every row of the committed
batches exactly once (the upsert table each id's last row in the order the
batches sent them, which the append table keeps),
each epoch is in exactly one Delta commit of each table (its txn action),
and committed-epoch is the last committed batch. The driver is a separate
process (spark_stream_driver.py) killed with its JVM (its process group);
QUIVER_SPARK_TEST_PAUSE makes it stop at the point to kill.

Without attempts (the client and server before #38) run 2's rerun
published batch 1 twice: its put joined the transaction the killed driver
had left open."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import quiver
from helpers import REPO, DeltaRs, Quiver, Spark, assert_rows, commits, log_actions, poll, require_tool
from quiver.spark import default_writer, foreach_batch_writer, to_arrow

SCHEMA = pa.schema([
    ("id", pa.int64()), ("v", pa.string()), ("n", pa.int32()),
    ("at", pa.timestamp("us", tz="UTC")), ("file", pa.int32()),
])
# Rows per input file (= per batch: batch i reads file i); file i holds ids
# 10*i .. 10*i+rows-1, so consecutive files update 10 ids of each other.
SIZES = [20, 20, 20, 20, 20, 20, 0, 20]
ENDPOINTS = ["append", "upsert"]
DRIVER_TIMEOUT_S = 240


def input_file(i: int) -> pa.Table:
    n = SIZES[i]
    ids = [10 * i + k for k in range(n)]
    return pa.table({
        "id": ids,
        "v": [f"f{i}-{x}" for x in ids],
        "n": [None if x % 3 == 0 else x for x in ids],
        "at": [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=x) for x in ids],
        "file": [i] * n,
    }, schema=SCHEMA)


def appended(files: list[int]) -> pa.Table:
    """The append table's rows once the input files `files` have committed."""
    return pa.concat_tables([input_file(i) for i in files])


def upserted(rows: pa.Table) -> pa.Table:
    """The upsert table after rows, in this order: each id's last row."""
    latest: dict[int, dict[str, Any]] = {}
    for row in rows.to_pylist():
        latest[row["id"]] = row
    return pa.Table.from_pylist(list(latest.values()), schema=SCHEMA)


def sent_rows(table: Path) -> pa.Table:
    """The append table's rows in the order the committed batches sent
    them: its epochs' commits in version order (not a compaction's), each
    commit's files in the order it adds them, each file's rows in order
    (the append sink writes a stream's rows in the order it receives them)."""
    parts = [pq.read_table(table / urllib.parse.unquote(a["add"]["path"])).select(SCHEMA.names).cast(SCHEMA)
             for actions in commits(table) if any("txn" in a for a in actions)
             for a in actions if "add" in a]
    return pa.concat_tables(parts) if parts else SCHEMA.empty_table()


class Pipeline:
    """The input folder, the checkpoint, Quiver on its workdir and the
    driver runs."""

    def __init__(self, serve: Callable[..., Quiver], root: Path) -> None:
        self.serve, self.root = serve, root
        self.input = root / "input"
        self.input.mkdir()
        now = dt.datetime.now().timestamp()
        for i in range(len(SIZES)):
            path = self.input / f"part-{i:03d}.parquet"
            pq.write_table(input_file(i), path)
            os.utime(path, (now - 100 + i, now - 100 + i))  # the file source's order
        self.tables = root / "tables"
        self.endpoints = [
            {"name": "append", "sink": "delta", "delta": {"table_uri": f"file://{self.tables / 'append'}"}},
            {"name": "upsert", "sink": "delta", "delta": {
                "table_uri": f"file://{self.tables / 'upsert'}", "mode": "upsert",
                "merge_keys": ["id"], "deletion_vectors": True}},
        ]
        self.workdir = root / "quiver"
        self.srv = serve(self.endpoints, workdir=self.workdir)
        self.runs = 0

    def restart_quiver(self, crash: str | None = None, extra: dict[str, Any] | None = None) -> None:
        """Starts Quiver again on its workdir; crash names a point where it
        exits as if killed (QUIVER_TEST_CRASH, package txn); extra adds
        config keys."""
        env = {"QUIVER_TEST_CRASH": crash} if crash else None
        self.srv = self.serve(self.endpoints, extra=extra, env=env, workdir=self.workdir)

    def driver(self, pause: str | None) -> tuple[subprocess.Popen[bytes], Path]:
        """Starts the driver (in its own process group, with its JVM),
        pausing at `pause` ("point:batch") if given."""
        self.runs += 1
        cfg = {
            "location": f"grpc://{self.srv.flight_addr}", "endpoints": ENDPOINTS,
            "input": str(self.input), "checkpoint": str(self.root / "checkpoint"),
            "tmp": str(self.root / f"spark-{self.runs}"),
        }
        cfg_path = self.root / f"driver-{self.runs}.json"
        cfg_path.write_text(json.dumps(cfg))
        marker = self.root / f"paused-{self.runs}"
        env = {**os.environ, "PYTHONPATH": str(REPO / "clients" / "python" / "src")}
        env.pop("QUIVER_SPARK_TEST_PAUSE", None)
        if pause:
            env["QUIVER_SPARK_TEST_PAUSE"] = pause
            env["QUIVER_SPARK_TEST_MARKER"] = str(marker)
        self.log = open(self.root / f"driver-{self.runs}.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, str(REPO / "interop" / "spark_stream_driver.py"), str(cfg_path)],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True,
        )
        return proc, marker

    def log_text(self) -> str:
        return (self.root / f"driver-{self.runs}.log").read_text(errors="replace")[-4000:]

    def run_until(self, pause: str) -> subprocess.Popen[bytes]:
        """Runs the driver until it pauses at `pause`; returns it, paused."""
        proc, marker = self.driver(pause)

        def paused() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"the driver exited with {proc.returncode} before {pause}:\n{self.log_text()}")
            return marker.exists()

        try:
            poll(f"the driver to pause at {pause}", DRIVER_TIMEOUT_S, paused, self.log_text)
        except BaseException:
            kill(proc)
            raise
        return proc

    def run_to_end(self) -> None:
        proc, _ = self.driver(None)
        try:
            rc = proc.wait(timeout=DRIVER_TIMEOUT_S)
        finally:
            kill(proc)
        assert rc == 0, f"the driver failed with {rc}:\n{self.log_text()}"

    def writer(self) -> str:
        """The default writer: the query id kept in the checkpoint."""
        query_id = json.loads((self.root / "checkpoint" / "metadata").read_text())["id"]
        return f"spark-{query_id}-append+upsert"

    def settled_epoch(self) -> int | None:
        """The committed epoch once both endpoints say the same (a commit
        decided before a kill may still be finishing on one of them)."""
        with quiver.connect(f"grpc://{self.srv.flight_addr}") as c:
            def settled() -> list[int | None] | None:
                epochs = [c.committed_epoch(ep, self.writer()) for ep in ENDPOINTS]
                return epochs if len(set(epochs)) == 1 else None
            return poll("both endpoints to agree on the committed epoch", 30, settled)[0]

    def check_settled(self) -> None:
        """check at the settled epoch. Both endpoints may agree while a
        commit decided before the kill has published on neither yet; when
        it lands during the check, the epoch moves: check again at the new
        one. A check that fails while the epoch stays is a failure."""
        for _ in range(3):
            upto = self.settled_epoch()
            if upto is None:
                return
            try:
                self.check(upto)
                return
            except AssertionError:
                if self.settled_epoch() == upto:
                    raise
        raise AssertionError("the committed epoch kept moving after the kill")

    def batch_files(self) -> list[list[int]]:
        """The input files of each micro-batch, as Spark's checkpoint
        records them: offsets/<batch> ends with the file source's log
        offset the batch reads up to, sources/0/<n> names the files of log
        entry n. One file per batch, except that a batch Spark plans again
        after a crash may take several."""
        entries: dict[int, set[int]] = {}
        for f in (self.root / "checkpoint" / "sources" / "0").iterdir():
            if not (f.name.isdigit() or f.name.endswith(".compact")):
                continue  # checksums
            for line in f.read_text().splitlines()[1:]:  # after the version line
                e = json.loads(line)
                entries.setdefault(e["batchId"], set()).add(int(Path(e["path"]).stem.split("-")[1]))
        ends = {int(f.name): json.loads(f.read_text().splitlines()[-1])["logOffset"]
                for f in (self.root / "checkpoint" / "offsets").iterdir() if f.name.isdigit()}
        batches, start = [], 0
        for b in range(len(ends)):
            batches.append(sorted(i for n in range(start, ends[b] + 1) for i in entries.get(n, ())))
            start = ends[b] + 1
        return batches

    def last_batch(self) -> int:
        return len(self.batch_files()) - 1

    def check(self, upto: int) -> None:
        """Batches 0..upto are committed, each once, and nothing else.

        The upsert table holds each id's last row in the order the batches
        sent their rows, which the append table keeps (each batch goes to
        both endpoints in one transaction): a batch Spark plans again after
        a crash may read several files, in an order Spark does not define,
        and files 3 and 4 share ids."""
        writer = self.writer()
        batches = self.batch_files()[: upto + 1]
        append = appended([i for b in batches for i in b])
        reader = DeltaRs()
        assert_rows(reader.rows(self.tables / "append"), append, f"append after batch {upto}")
        assert_rows(reader.rows(self.tables / "upsert"), upserted(sent_rows(self.tables / "append")),
                    f"upsert after batch {upto} (each id's last row as the append table has them)")
        for ep in ENDPOINTS:
            txns = log_actions(self.tables / ep, "txn")
            assert {t["appId"] for t in txns} == {writer}, txns
            epochs = sorted(t["version"] for t in txns)
            assert epochs == list(range(upto + 1)), f"{ep}: epochs in the Delta log {epochs}, want each of 0..{upto} once"
        # Each append commit holds its batch's rows.
        for version, actions in enumerate(commits(self.tables / "append")):
            epochs = [a["txn"]["version"] for a in actions if "txn" in a]
            if epochs:
                rows = sum(json.loads(a["add"]["stats"])["numRecords"] for a in actions if "add" in a)
                want = sum(SIZES[i] for i in batches[epochs[0]])
                assert rows == want, f"commit {version}: epoch {epochs[0]} (files {batches[epochs[0]]}) added {rows} rows, want {want}"
        with quiver.connect(f"grpc://{self.srv.flight_addr}") as c:
            for ep in ENDPOINTS:
                assert c.committed_epoch(ep, writer) == upto, ep


def test_spark_streaming_random_kills(
    serve: Callable[..., Quiver], tmp_path: Path, request: pytest.FixtureRequest,
) -> None:
    """The driver, and once Quiver too, killed -9 at random times (seeded:
    QUIVER_TEST_SEED, else 38): after each kill, whatever committed is in
    both tables exactly once and committed-epoch says how far; the last run
    finishes the query with every batch once."""
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        require_tool("java", "Spark needs Java 17 (apt-get install openjdk-17-jre-headless)")
    rng = random.Random(int(os.environ.get("QUIVER_TEST_SEED", "38")))
    p = Pipeline(serve, tmp_path)
    for round_ in range(3):
        driver, _ = p.driver(None)
        try:
            time.sleep(rng.uniform(8, 25))  # a kill at a random point of the run
        finally:
            if round_ == 1:
                p.srv.kill()
            kill(driver)
        if round_ == 1:
            p.restart_quiver()
        if not (p.root / "checkpoint" / "metadata").exists():
            continue  # killed before the query started
        p.check_settled()
    p.run_to_end()
    p.check(p.last_batch())

def kill(proc: subprocess.Popen[bytes]) -> None:
    """kill -9 of the driver's process group (Python and its JVM)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def test_spark_streaming_exactly_once_across_crashes(
    serve: Callable[..., Quiver], tmp_path: Path, request: pytest.FixtureRequest,
) -> None:
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        require_tool("java", "Spark needs Java 17 (apt-get install openjdk-17-jre-headless)")
    p = Pipeline(serve, tmp_path)

    # The driver dies after its puts: the rerun fences the staged attempt.
    kill(p.run_until("put:1"))
    p.check(0)
    # ... after precommit: the rerun fences the precommitted attempt.
    kill(p.run_until("precommit:2"))
    p.check(1)
    # ... after Quiver's commit, before Spark recorded the batch: a replay.
    kill(p.run_until("commit:3"))
    p.check(3)

    # Quiver dies with a transaction open, then the driver.
    driver = p.run_until("put:4")
    p.srv.kill()
    kill(driver)
    p.restart_quiver()
    p.check(3)
    # Quiver dies with a transaction precommitted, then the driver.
    driver = p.run_until("precommit:5")
    p.srv.kill()
    kill(driver)
    p.restart_quiver()
    p.check(4)
    # Quiver dies in the middle of a commit, once it is decided: the
    # restarted server finishes it, and the rerun replays nothing twice.
    p.srv.stop()
    p.restart_quiver(crash="after-commit-decision")
    driver, _ = p.driver(None)
    try:
        poll("Quiver to exit in the commit", DRIVER_TIMEOUT_S, lambda: p.srv.proc.poll() is not None, p.log_text)
    finally:
        kill(driver)
    p.restart_quiver()
    p.check(5)
    # The driver dies after its puts and the transaction expires (txn.ttl)
    # before the rerun, which begins the epoch again.
    p.srv.stop()
    p.restart_quiver(extra={"txn": {"ttl": "5s"}})
    kill(p.run_until("put:6"))
    client = p.srv.client()
    poll("batch 6's transaction to expire", 60,
         lambda: client.action("status", writer=p.writer(), epoch=6)["state"] == "aborted")
    p.srv.stop()
    p.restart_quiver()

    p.run_to_end()
    p.check(p.last_batch())

    # Spark reads the same rows from both tables.
    spark = Spark(request.getfixturevalue("spark_session"))
    append = appended(list(range(len(SIZES))))
    assert_rows(spark.rows(p.tables / "append"), append, "spark: append")
    assert_rows(spark.rows(p.tables / "upsert"), upserted(sent_rows(p.tables / "append")), "spark: upsert")


# --- the helper without a streaming query -----------------------------------


class Batch:
    """Stands in for a micro-batch DataFrame: toArrow() and a sparkSession
    whose local property holds the query id."""

    def __init__(self, table: pa.Table, query_id: str | None = "q-1", active: int = 1) -> None:
        self.table = table
        props = {"sql.streaming.queryId": query_id}
        queries = [type("Query", (), {"id": f"active-{i}"})() for i in range(active)]
        self.sparkSession = type("Session", (), {
            "sparkContext": type("Context", (), {"getLocalProperty": staticmethod(props.get)})(),
            "streams": type("Streams", (), {"active": queries})(),
        })()

    def toArrow(self) -> pa.Table:
        return self.table


def test_helper_batches_empty_and_refused(serve: Callable[..., Quiver], tmp_path: Path) -> None:
    """An empty batch still commits its epoch on every endpoint; a batch
    with a null merge key is refused as a whole (InvalidInputError, nothing
    of it on either endpoint, the epoch uncommitted) and commits once
    fixed; a rerun of a committed batch changes nothing."""
    srv = serve([
        {"name": "append", "sink": "delta", "delta": {"table_uri": f"file://{tmp_path / 'append'}"}},
        {"name": "upsert", "sink": "delta", "delta": {"table_uri": f"file://{tmp_path / 'upsert'}",
                                                      "mode": "upsert", "merge_keys": ["id"]}},
    ])
    write = foreach_batch_writer(f"grpc://{srv.flight_addr}", ENDPOINTS)
    writer = default_writer(Batch(input_file(0)), ENDPOINTS)
    assert writer == "spark-q-1-append+upsert"
    with quiver.connect(f"grpc://{srv.flight_addr}") as c:
        def committed() -> list[int | None]:
            return [c.committed_epoch(ep, writer) for ep in ENDPOINTS]

        write(Batch(input_file(0)), 0)
        write(Batch(input_file(6)), 1)  # no rows
        assert input_file(6).num_rows == 0 and committed() == [1, 1]
        bad = input_file(2).set_column(0, "id", pa.array([None] + list(range(21, 40)), pa.int64()))
        with pytest.raises(quiver.InvalidInputError, match="id"):
            write(Batch(bad), 2)
        assert committed() == [1, 1]
        assert_rows(DeltaRs().rows(tmp_path / "append"), input_file(0), "append after the refused batch")
        write(Batch(input_file(2)), 2)
        write(Batch(input_file(2)), 2)  # Spark's rerun after a crash past the commit
        assert committed() == [2, 2]
    assert_rows(DeltaRs().rows(tmp_path / "append"), pa.concat_tables([input_file(0), input_file(2)]), "append")
    assert_rows(DeltaRs().rows(tmp_path / "upsert"), pa.concat_tables([input_file(0), input_file(2)]), "upsert")


def test_default_writer_without_the_local_property() -> None:
    """Without Spark's local property the only active query names the
    writer; with several (or none) the helper asks for writer=."""
    assert default_writer(Batch(pa.table({}), query_id=None), ["a"]) == "spark-active-0-a"
    with pytest.raises(RuntimeError, match="pass writer= explicitly"):
        default_writer(Batch(pa.table({}), query_id=None, active=2), ["a"])
    long = default_writer(Batch(pa.table({})), [f"endpoint-{i}" for i in range(10)])
    assert len(long) == len("spark-q-1-") + 16


class NoToArrow:
    """A DataFrame without toArrow (PySpark before 4)."""

    def __init__(self, df: Any) -> None:
        self._df = df

    def __getattr__(self, name: str) -> Any:
        if name == "toArrow":
            raise AttributeError(name)
        return getattr(self._df, name)


def test_to_arrow_through_pandas(spark_session: Any) -> None:
    """Without toArrow the rows go through pandas and come back with
    Spark's types: nullable ints as ints, timestamps the same instants
    (UTC) whatever the session time zone."""
    before = spark_session.conf.get("spark.sql.session.timeZone")
    spark_session.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        rows = [tuple(r.values()) for r in input_file(1).to_pylist()] + [(None,) * 5]
        df = spark_session.createDataFrame(rows, "id LONG, v STRING, n INT, at TIMESTAMP, file INT")
        direct, fallback = df.toArrow(), to_arrow(NoToArrow(df))
    finally:
        spark_session.conf.set("spark.sql.session.timeZone", before)
    assert fallback.schema == direct.schema, (fallback.schema, direct.schema)
    assert fallback.schema.field("n").type == pa.int32() and fallback.schema.field("at").type.tz == "UTC"
    assert fallback.to_pylist() == direct.to_pylist()
    assert_rows(fallback.slice(0, 20), input_file(1), "through pandas")
