"""Helpers of the interop suite: the reference-tool rule, a `quiver serve`
process, a Flight client, the two Delta readers and row-set comparison."""

from __future__ import annotations

import base64
import collections
import datetime as dt
import json
import math
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Counter, NoReturn

import pyarrow as pa
import pyarrow.flight as flight
import pytest

REPO = Path(__file__).resolve().parent.parent


def in_ci() -> bool:
    """CI=true, as .ci/run sets it."""
    return os.environ.get("CI") == "true"


def require_tool(tool: str, why: str) -> NoReturn:
    """The rule of internal/reftool: a test whose reference tool is missing
    is skipped, saying so, on a developer's machine and fails in CI."""
    msg = f"reference tool {tool} is unavailable: {why}"
    if in_ci():
        pytest.fail(msg + " (CI=true: a missing reference tool fails the test)", pytrace=False)
    pytest.skip(msg + " (skipped; with CI=true this fails)")


def go_build(package: str, name: str) -> Path:
    """Builds a Go main package of the repository into .cache/NAME with
    the go on PATH (or /usr/local/go/bin/go) and returns the binary."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not os.access(go, os.X_OK):
        require_tool("go", f"not in PATH, needed to build {package}")
    out = REPO / ".cache" / name
    subprocess.run([go, "build", "-o", str(out), package], cwd=REPO, check=True)
    return out


def poll(what: str, timeout_s: float, cond: Callable[[], Any], on_timeout: Callable[[], str] = lambda: "") -> Any:
    """Calls cond until it returns a truthy value and returns it; fails after
    timeout_s with what and on_timeout()."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}\n{on_timeout()}")
        time.sleep(0.05)


def start_spark(tmp: Path, app: str, **conf: str) -> Any:
    """A SparkSession with Delta Lake for the suite and the benchmarks:
    local[2], 1 GiB of driver memory, no UI, two shuffle partitions, session
    time zone UTC; Delta's jars are fetched once from Maven Central into
    .cache/ivy (git-ignored) and resolved from there later; conf adds or overrides
    settings ("spark.driver.memory": "2g")."""
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    settings = {
        "spark.driver.memory": "1g",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.warehouse.dir": str(tmp / "warehouse"),
        "spark.local.dir": str(tmp / "local"),
        "spark.jars.ivy": str(REPO / ".cache" / "ivy"),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        **conf,
    }
    builder = SparkSession.builder.master("local[2]").appName(app)
    for k, v in settings.items():
        builder = builder.config(k, v)
    session = configure_spark_with_delta_pip(builder).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


# --- the server ------------------------------------------------------------


class Quiver:
    """A `quiver serve` process on free 127.0.0.1 ports (port 0, read back
    from its log) with its own data_dir and a generated config; env adds
    to its environment (credentials of an object store)."""

    def __init__(
        self, binary: Path, workdir: Path, endpoints: list[dict[str, Any]],
        extra: dict[str, Any] | None = None, env: dict[str, str] | None = None,
    ) -> None:
        """extra adds top-level config keys (auth, limits); env adds
        environment variables (token secrets). A workdir used before keeps
        its data_dir: the server restarts on its journal."""
        self.workdir = workdir
        self.endpoints = endpoints
        workdir.mkdir(parents=True, exist_ok=True)
        config = {
            "listen": "127.0.0.1:0",
            "http_listen": "127.0.0.1:0",
            "data_dir": str(workdir / "data"),
            "log": {"level": "info", "format": "json"},
            "endpoints": endpoints,
            **(extra or {}),
        }
        self.config_path = workdir / "quiver.yaml"  # JSON is YAML
        self.config_path.write_text(json.dumps(config, indent=2))
        self.log_path = workdir / "quiver.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [str(binary), "serve", "--config", str(self.config_path)],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )
        self.flight_addr = ""
        self.http_addr = ""
        self._client: Client | None = None
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def _listening(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"quiver exited with {self.proc.returncode}:\n{self.log()}")
        for line in self.log().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("msg") == "flight listening":
                self.flight_addr = rec["addr"]
            elif rec.get("msg") == "http listening":
                self.http_addr = rec["addr"]
        return bool(self.flight_addr and self.http_addr)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.http_addr}/readyz", timeout=5) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _wait_ready(self, timeout_s: float = 60) -> None:
        poll("quiver to listen", timeout_s, self._listening, self.log)
        poll("quiver /readyz", timeout_s, self._ready, self.log)

    def table_path(self, endpoint: str) -> Path:
        """The local root of a delta endpoint's file:// table."""
        uri = next(e["delta"]["table_uri"] for e in self.endpoints if e["name"] == endpoint)
        return Path(uri.removeprefix("file://"))

    def client(self) -> Client:
        if self._client is None:
            self._client = Client(self.flight_addr)
        return self._client

    def kill(self) -> None:
        """kill -9: no shutdown, no flush."""
        self.proc.kill()
        self.proc.wait()
        self.stop()

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


class Client:
    """pyarrow.flight against Quiver: auto-commit puts, transactions, actions."""

    def __init__(self, addr: str) -> None:
        self.flight = flight.connect(f"grpc://{addr}")

    def close(self) -> None:
        self.flight.close()

    def _put(self, descriptor: flight.FlightDescriptor, table: pa.Table, chunk: int | None) -> dict[str, Any]:
        writer, reader = self.flight.do_put(descriptor, table.schema)
        writer.write_table(table, max_chunksize=chunk)
        writer.done_writing()
        ack: dict[str, Any] = {}
        while (buf := reader.read()) is not None:  # one ack per batch, then the final one
            ack = json.loads(buf.to_pybytes())
        writer.close()
        return ack

    def put_retrying(self, endpoint: str, table: pa.Table, attempts: int = 20) -> tuple[dict[str, Any], int]:
        """put, sent again while it fails with Aborted (a commit conflict: an
        auto-commit stream that fails publishes nothing). Returns the ack
        and the number of conflicts."""
        for conflicts in range(attempts):
            try:
                return self.put(endpoint, table), conflicts
            except flight.FlightError as e:
                if "aborted error" not in str(e):
                    raise
        raise AssertionError(f"{endpoint}: {attempts} commit conflicts in a row")

    def put(self, endpoint: str, table: pa.Table, chunk: int | None = None) -> dict[str, Any]:
        """An auto-commit stream (PATH descriptor): one Delta commit. Returns
        the final ack, {"committed": true, "rows": N, "version": V}."""
        ack = self._put(flight.FlightDescriptor.for_path(endpoint), table, chunk)
        assert ack.get("committed") is True and ack["rows"] == table.num_rows, ack
        return ack

    def put_txn(self, endpoint: str, writer: str, epoch: int, table: pa.Table) -> dict[str, Any]:
        """A transactional stream (CMD descriptor) joining (writer, epoch)."""
        cmd = json.dumps({"endpoint": endpoint, "writer": writer, "epoch": epoch}).encode()
        return self._put(flight.FlightDescriptor.for_command(cmd), table, None)

    def action(self, name: str, **body: Any) -> dict[str, Any]:
        results = list(self.flight.do_action(flight.Action(name, json.dumps(body).encode())))
        assert len(results) == 1, f"{name}: {len(results)} results"
        return json.loads(results[0].body.to_pybytes())

    def txn(self, writer: str, epoch: int, puts: list[tuple[str, pa.Table]]) -> dict[str, Any]:
        """begin, the puts, precommit and commit (handing back the sealed
        precommit descriptors). Returns the commit answer."""
        assert self.action("begin", writer=writer, epoch=epoch)["state"] == "open"
        for endpoint, table in puts:
            ack = self.put_txn(endpoint, writer, epoch, table)
            assert ack.get("staged") is True and ack["rows"] == table.num_rows, ack
        pre = self.action("precommit", writer=writer, epoch=epoch)
        assert pre["state"] == "precommitted", pre
        descriptors: dict[str, list[str]] = {}
        for p in pre["participants"]:
            sealed = base64.b64decode(p["descriptor"], validate=True)
            assert sealed[0] == 2 and len(sealed) > 34 + sealed[33], "a sealed descriptor: version 2, a 32-byte tag, the attempt, the sink's bytes"
            descriptors.setdefault(p["endpoint"], []).append(p["descriptor"])
        assert sorted(descriptors) == sorted({e for e, _ in puts}), pre
        done = self.action("commit", writer=writer, epoch=epoch, descriptors=descriptors)
        assert done["state"] == "committed", done
        return done


# --- written tables and their readers ---------------------------------------


@dataclass
class Written:
    """A table and what was sent to it: the rows it must hold and the table
    versions that Quiver's acks (or other writers) reported."""

    path: Path
    expected: pa.Table
    versions: list[int] = field(default_factory=list)
    commits: int | None = None  # the number of commits, when known (other writers too)


class DeltaRs:
    name = "delta-rs"

    def rows(self, path: Path) -> pa.Table:
        """DeltaTable.to_pyarrow_table(); for tables with deletion vectors,
        which that path refuses (deltalake 1.6: "reader features
        {'deletionVectors'} ... not yet supported"), and with column
        mapping, which it reads as nulls (deltalake 1.6.6, Spark's own
        tables too), delta-rs's DataFusion engine (QueryBuilder), which
        applies both."""
        from deltalake import DeltaTable, QueryBuilder

        table = DeltaTable(str(path))
        protocol = table.protocol()
        features = protocol.reader_features or []
        if "deletionVectors" in features or "columnMapping" in features or protocol.min_reader_version == 2:
            return pa.table(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())
        return table.to_pyarrow_table()

    def versions(self, path: Path) -> list[int]:
        from deltalake import DeltaTable

        return sorted(h["version"] for h in DeltaTable(str(path)).history())

    def check_detail(self, path: Path) -> None:
        from deltalake import DeltaTable

        t = DeltaTable(str(path))
        assert t.protocol().min_reader_version >= 1
        assert len(t.file_uris()) == len(t.get_add_actions(flatten=True))


class Spark:
    name = "spark"

    def __init__(self, session: Any) -> None:
        self.session = session

    def rows(self, path: Path) -> pa.Table:
        return self.session.read.format("delta").load(str(path)).toArrow()

    def versions(self, path: Path) -> list[int]:
        rows = self.session.sql(f"DESCRIBE HISTORY delta.`{path}`").select("version").collect()
        return sorted(r.version for r in rows)

    def check_detail(self, path: Path) -> None:
        from deltalake import DeltaTable

        detail = self.session.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()
        assert len(detail) == 1 and detail[0].format == "delta", detail
        assert detail[0].numFiles == len(DeltaTable(str(path)).file_uris()), detail


Reader = DeltaRs | Spark


def check_table(reader: Reader, written: Written, last_writer_quiver: bool = True) -> None:
    """The reader returns exactly the rows sent (as a row set, nulls
    included), the version history is 0..latest without holes and holds
    every acked version (the latest one when Quiver wrote last), and the
    table's detail loads."""
    assert_rows(reader.rows(written.path), written.expected, reader.name)
    history = reader.versions(written.path)
    assert history == list(range(len(history))), f"{reader.name}: versions {history} are not 0..N"
    assert set(written.versions) <= set(history), f"{reader.name}: acked {written.versions}, history {history}"
    if last_writer_quiver and written.versions:
        assert history[-1] == max(written.versions), f"{reader.name}: latest {history[-1]}, acked {written.versions}"
    if written.commits is not None:
        assert len(history) == written.commits, f"{reader.name}: {len(history)} versions, {written.commits} commits"
    reader.check_detail(written.path)


# --- row sets -------------------------------------------------------------


def _norm(v: Any) -> Any:
    """A hashable, comparable form of a value of to_pylist()."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, dict):
        return tuple(sorted((k, _norm(x)) for k, x in v.items()))
    if isinstance(v, list):  # lists, and maps as lists of (key, value)
        return tuple(_norm(x) for x in v)
    if isinstance(v, tuple):
        return tuple(_norm(x) for x in v)
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc)
    return v


def row_set(table: pa.Table, columns: list[str]) -> Counter[tuple[Any, ...]]:
    cols = [table.column(c).to_pylist() for c in columns]
    return collections.Counter(tuple(_norm(v) for v in row) for row in zip(*cols))


def assert_rows(actual: pa.Table, expected: pa.Table, who: str) -> None:
    """actual holds exactly expected's rows (a multiset; column order free)."""
    assert sorted(actual.column_names) == sorted(expected.column_names), (
        f"{who}: columns {actual.column_names}, sent {expected.column_names}"
    )
    cols = expected.column_names
    got, want = row_set(actual, cols), row_set(expected, cols)
    if got != want:
        missing, extra = want - got, got - want
        raise AssertionError(
            f"{who}: {actual.num_rows} rows, sent {expected.num_rows}; "
            f"{sum(missing.values())} sent rows missing, e.g. {list(missing)[:3]}; "
            f"{sum(extra.values())} rows not sent, e.g. {list(extra)[:3]} (columns {cols})"
        )


def commits(path: Path) -> list[list[dict[str, Any]]]:
    """The actions of each JSON commit of the table's _delta_log, in
    version order."""
    return [[json.loads(line) for line in f.read_text().splitlines() if line.strip()]
            for f in sorted((path / "_delta_log").glob("*.json"))]


def log_actions(path: Path, kind: str) -> list[dict[str, Any]]:
    """Every action of kind (add, remove, txn, metaData, protocol, ...) in the
    JSON commits of the table's _delta_log, in version order."""
    return [a[kind] for c in commits(path) for a in c if kind in a]


READERS = ("delta-rs", "spark")


def readers(**xfail: pytest.MarkDecorator) -> list[Any]:
    """The reader_name parameters, with an xfail mark for the readers given
    (e.g. readers(spark=SOME_DEFECT))."""
    return [pytest.param(r, marks=xfail[r.replace("-", "_")]) if r.replace("-", "_") in xfail else r for r in READERS]
