"""The Python client (clients/python, package quiver) against the real
`quiver serve`: pandas and Polars frames read back from Delta by delta-rs,
every input kind, batch splitting under the server's message limit,
transactions that survive a kill -9 of the server, and every error class."""

from __future__ import annotations

import datetime as dt
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from deltalake import DeltaTable

import quiver
from helpers import Quiver, require_tool

# Small enough that a few MB exceed it, large enough for everything else.
MAX_MESSAGE = 1 << 20


def delta(name: str, root: Path, **cfg: Any) -> dict[str, Any]:
    return {"name": name, "sink": "delta", "delta": {"table_uri": f"file://{root / name}", **cfg}}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pyclient")


@pytest.fixture(scope="module")
def server(serve: Callable[..., Quiver], root: Path) -> Quiver:
    return serve(
        [
            {"name": "devnull", "sink": "discard"},
            delta("pandas", root),
            delta("polars", root),
            delta("upsert", root, mode="upsert", merge_keys=["id"]),
            delta("abandon", root),
        ],
        {"limits": {"max_message_bytes": MAX_MESSAGE}},
    )


@pytest.fixture(scope="module")
def client(server: Quiver) -> quiver.Client:
    c = quiver.connect(f"grpc://{server.flight_addr}", max_batch_bytes=MAX_MESSAGE // 4)
    yield c
    c.close()


def read(root: Path, name: str) -> pa.Table:
    return DeltaTable(str(root / name)).to_pyarrow_table()


def test_pandas_frames(client: quiver.Client, root: Path) -> None:
    """The dtypes pandas makes land as the values they hold."""
    ts = pd.Series(pd.to_datetime(["2024-03-01 01:02:03.123456", "2024-12-31 23:59:59", None], format="ISO8601"))
    frame = pd.DataFrame({
        "category": pd.Categorical(["a", "b", None]),
        "aware": ts.astype("datetime64[ns]").dt.tz_localize("Europe/Berlin"),
        "naive": ts.astype("datetime64[ns]"),
        "nullable_int": pd.array([1, None, 3], dtype="Int64"),
        "arrow_string": pd.array(["x", None, "z"], dtype="string[pyarrow]"),
        "objects": pd.Series(["p", None, "r"], dtype=object),
        "floats": [1.5, float("nan"), None],
    })
    ack = client.put("pandas", frame)
    assert ack.committed and ack.rows == 3 and ack.version == 0, ack
    got = read(root, "pandas").to_pydict()
    berlin = [t.tz_localize("Europe/Berlin").to_pydatetime().astimezone(dt.timezone.utc) for t in ts[:2]]
    assert got["category"] == ["a", "b", None]
    assert got["aware"] == [*berlin, None]
    assert got["naive"] == [*(t.to_pydatetime() for t in ts[:2]), None]
    assert got["nullable_int"] == [1, None, 3]
    assert got["arrow_string"] == ["x", None, "z"]
    assert got["objects"] == ["p", None, "r"]
    # pandas turns NaN and None into NaN of float64, which pyarrow sends as null.
    assert got["floats"][0] == 1.5 and got["floats"][1:] == [None, None]


def test_polars_frames(client: quiver.Client, root: Path) -> None:
    """Polars' string views are sent as large strings, which the Delta sink takes."""
    frame = pl.DataFrame({
        "id": [1, 2, None],
        "name": ["a", None, "c"],
        "tags": [["x"], [], None],
        "at": [dt.datetime(2024, 1, 1), None, dt.datetime(2024, 1, 3)],
    })
    assert client.put("polars", frame).rows == 3
    got = read(root, "polars").to_pylist()
    assert sorted(map(repr, got)) == sorted(map(repr, frame.to_dicts()))


def test_inputs_and_acks(client: quiver.Client) -> None:
    """Table, RecordBatch, reader, iterable of batches and __arrow_c_stream__
    objects are all sent; on_ack sees every batch."""
    table = pa.table({"id": pa.array(range(10), pa.int64())})
    batches = table.to_batches(max_chunksize=3)
    for data, n_batches in [
        (table, 1),
        (batches[0], 1),
        (pa.RecordBatchReader.from_batches(table.schema, batches), 4),
        (iter(batches), 4),
        (pl.DataFrame({"id": list(range(10))}), 1),
    ]:
        acks: list[dict[str, Any]] = []
        ack = client.put("devnull", data, on_ack=acks.append)
        rows = data.num_rows if hasattr(data, "num_rows") else 10
        assert ack.committed and ack.rows == rows, (data, ack)
        assert [a["batch"] for a in acks] == list(range(n_batches)) and sum(a["rows"] for a in acks) == rows
    with pytest.raises(TypeError, match="cannot send dict"):
        client.put("devnull", {"id": [1]})
    with pytest.raises(ValueError, match="empty iterable"):
        client.put("devnull", [])


def test_failing_data_publishes_nothing(client: quiver.Client, root: Path) -> None:
    """A generator that raises mid-stream fails the put with its own
    exception, and the batches sent before are not published."""
    table = pa.table({"category": pa.array(["a", "b"])})
    client.put("abandon", table)

    def batches() -> Any:
        yield table.to_batches()[0]
        yield table.to_batches()[0]
        raise RuntimeError("source went away")

    with pytest.raises(RuntimeError, match="source went away"):
        client.put("abandon", pa.RecordBatchReader.from_batches(table.schema, batches()))
    assert read(root, "abandon").num_rows == 2


def test_larger_than_the_message_limit(server: Quiver, client: quiver.Client) -> None:
    """A table of 4 MB goes out in slices under the server's 1 MiB limit;
    without splitting the same table is refused."""
    table = pa.table({"s": pa.array(["x" * 1000] * 4000)})
    assert table.nbytes > 3 * MAX_MESSAGE
    acks: list[dict[str, Any]] = []
    ack = client.put("devnull", table, on_ack=acks.append)
    assert ack.rows == 4000 and len(acks) >= 16, (ack, len(acks))
    unsplit = quiver.connect(f"grpc://{server.flight_addr}", max_batch_bytes=1 << 30)
    with pytest.raises(quiver.ResourceExhaustedError):
        unsplit.put("devnull", table)
    unsplit.close()


def test_transaction_survives_kill_9(serve: Callable[..., Quiver], tmp_path: Path) -> None:
    """Precommitted before a kill -9, committed after the restart, replayed
    after that: the rows are in the table once."""
    endpoints = [delta("events", tmp_path / "tables")]
    workdir = tmp_path / "quiver"
    srv = serve(endpoints, workdir=workdir)
    table = pa.table({"id": pa.array(range(100), pa.int64())})
    with quiver.connect(f"grpc://{srv.flight_addr}") as c:
        with c.transaction("job", 1) as tx:
            assert tx.put("events", table).staged
        assert tx.status().state == "precommitted"
    srv.kill()

    srv = serve(endpoints, workdir=workdir)
    with quiver.connect(f"grpc://{srv.flight_addr}") as c:
        tx = c.transaction("job", 1)
        res = tx.commit()
        assert res.state == "committed" and not res.replayed, res
        assert c.committed_epoch("events", "job") == 1
    srv.kill()

    srv = serve(endpoints, workdir=workdir)
    with quiver.connect(f"grpc://{srv.flight_addr}") as c:
        tx = c.transaction("job", 1)
        assert tx.put("events", table).replayed
        assert tx.commit().replayed
        # An exception in the block rolls the transaction back.
        with pytest.raises(RuntimeError), c.transaction("job", 2) as tx2:
            tx2.put("events", table)
            raise RuntimeError("pipeline failed")
        assert tx2.status().state == "aborted"
    assert DeltaTable(str(tmp_path / "tables" / "events")).to_pyarrow_table().num_rows == 100


def test_transaction_begins_on_entry_and_names_its_attempt(serve: Callable[..., Quiver], tmp_path: Path) -> None:
    """A replay after a crash at any point publishes the batch once: the
    block begins a new attempt, fencing what a crashed client left (an
    attempt that only put, or one that precommitted); puts and actions
    carry the attempt, so the crashed client's object can no longer act on
    the replay's attempt, and a block that raises rolls back only its own.
    With the client before attempts (no begin on entry, no attempt), the
    replay's put joined the crashed client's transaction when it reused its
    connection, and the commit published the batch twice."""
    endpoints = [delta("events", tmp_path / "tables")]
    srv = serve(endpoints)
    table = pa.table({"id": pa.array(range(10), pa.int64())})
    loc = f"grpc://{srv.flight_addr}"
    with quiver.connect(loc) as c, quiver.connect(loc) as again:
        # Epoch 1: the crashed client put and stopped; the replay runs on the
        # SAME connection (a pipeline retrying in-process).
        crashed = c.transaction("job", 1)
        assert crashed.begin().state == "open" and len(crashed.attempt or "") == 16
        assert crashed.put("events", table).staged
        with c.transaction("job", 1) as tx:
            assert tx.attempt != crashed.attempt
            assert tx.put("events", table).staged
        with pytest.raises(quiver.WrongStateError, match="not the current attempt"):
            crashed.put("events", table)
        with pytest.raises(quiver.WrongStateError, match="not the current attempt"):
            crashed.precommit()
        res = tx.commit()
        assert res.state == "committed" and not res.replayed and res.attempt == tx.attempt, res

        # Epoch 2: the crashed client precommitted; the replay from another
        # connection fences it and commits its own rows once.
        with again.transaction("job", 2) as dead:
            dead.put("events", table)
        with c.transaction("job", 2) as tx:
            assert tx.put("events", table).staged
        assert tx.commit().state == "committed"
        assert again.committed_epoch("events", "job") == 2

        # Epoch 2 again (a crash after the commit): begin answers replayed,
        # puts and commit change nothing and raise nothing.
        with c.transaction("job", 2) as tx:
            assert tx.replayed and tx.put("events", table).replayed
        assert tx.commit().replayed

        # Epoch 3: a block that raises after another attempt fenced it rolls
        # back only its own attempt; the newer one commits.
        with pytest.raises(RuntimeError), c.transaction("job", 3) as old:
            old.put("events", table)
            newer = again.transaction("job", 3)
            newer.begin()
            newer.put("events", table)
            raise RuntimeError("pipeline failed")
        assert old.status().state == "open" and old.status().attempt == newer.attempt
        newer.precommit()
        assert newer.commit().state == "committed"

        # A resuming pipeline whose checkpoint recorded the precommit keeps it.
        with c.transaction("job", 4) as pre:
            pre.put("events", table)
        resumed = again.transaction("job", 4)
        got = resumed.begin(resume=True)
        assert got.state == "precommitted" and got.attempt == pre.attempt, got
        assert resumed.commit().state == "committed"
    rows = DeltaTable(str(tmp_path / "tables" / "events")).to_pyarrow_table()
    assert rows.num_rows == 40 and sorted(rows.column("id").to_pylist()) == sorted(list(range(10)) * 4)


def test_begin_retries_while_a_fenced_attempt_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """begin is sent again while the server says a fenced attempt is still
    ending ("retry shortly"); other refusals are raised at once."""
    client = quiver.Client(None)  # type: ignore[arg-type]
    calls: list[tuple[str, dict[str, Any]]] = []
    answers: list[Any] = [
        quiver.WrongStateError("txn: w@1: 1 stream(s) of the fenced attempt are still ending: retry shortly"),
        quiver.WrongStateError("txn: w@1 was aborted and is still being rolled back (1 streams ending): retry shortly"),
        {"writer": "w", "epoch": 1, "state": "open", "attempt": "00112233445566ff"},
    ]

    def action(name: str, body: dict[str, Any] | None = None) -> Any:
        calls.append((name, dict(body or {})))
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    monkeypatch.setattr(client, "action", action)
    tx = client.transaction("w", 1)
    assert tx.begin(ttl_s=5).attempt == "00112233445566ff" == tx.attempt
    assert calls == [("begin", {"writer": "w", "epoch": 1, "ttl_s": 5})] * 3
    answers.append({"writer": "w", "epoch": 1, "state": "aborted", "attempt": "00112233445566ff"})
    tx.rollback()
    assert calls[-1] == ("rollback", {"writer": "w", "epoch": 1, "attempt": "00112233445566ff"})
    answers.append({"writer": "w", "epoch": 1, "state": "aborted", "attempt": "00112233445566ff"})
    tx.rollback(give_up=True)
    assert calls[-1] == ("rollback", {"writer": "w", "epoch": 1, "attempt": "00112233445566ff", "give_up": True})
    answers.append(quiver.WrongStateError("txn: w@1 is fenced by epoch 5 of the same writer"))
    with pytest.raises(quiver.WrongStateError, match="fenced by epoch 5"):
        client.transaction("w", 1).begin()


def test_error_classes(server: Quiver, client: quiver.Client, root: Path) -> None:
    """Each gRPC class is its own exception, carrying the server's message."""
    with pytest.raises(quiver.NotFoundError, match='unknown endpoint "nope"') as e:
        client.put("nope", pa.table({"id": [1]}))
    assert e.value.code == "NOT_FOUND" and "this server has: abandon, devnull" in e.value.message
    client.put("pandas", pd.DataFrame({"category": pd.Categorical(["a"])}))
    with pytest.raises(quiver.InvalidInputError, match="category"):
        client.put("pandas", pa.table({"category": pa.array([1], pa.int64())}))
    client.transaction("fenced", 5).begin()
    with pytest.raises(quiver.WrongStateError, match="fenced by epoch 5"):
        client.transaction("fenced", 3).begin()

    # Aborted: a transaction's upsert plan goes stale when another commit
    # rewrites the file it read.
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"]})
    client.put("upsert", rows)
    with client.transaction("stale", 1) as tx:
        tx.put("upsert", rows)
    client.put("upsert", rows)
    with pytest.raises(quiver.ConflictError, match="roll back the transaction and replay it"):
        tx.commit()

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with pytest.raises(quiver.UnavailableError) as e:
        quiver.connect(f"grpc://127.0.0.1:{port}", retries=1).health()
    assert e.value.retryable


def test_auth_errors(serve: Callable[..., Quiver]) -> None:
    srv = serve(
        [{"name": "devnull", "sink": "discard"}, {"name": "other", "sink": "discard"}],
        {"auth": {"tokens": [{"name": "ingest", "token_env": "PYCLIENT_TOKEN", "endpoints": ["devnull"], "actions": ["health"]}]}},
        {"PYCLIENT_TOKEN": "s3cret"},
    )
    table = pa.table({"id": [1]})
    with quiver.connect(f"grpc://{srv.flight_addr}", token="s3cret") as c:
        assert c.put("devnull", table).committed
        assert c.health()["status"] == "ok"
        with pytest.raises(quiver.PermissionDeniedError, match='may not use endpoint "other"'):
            c.put("other", table)
        with pytest.raises(quiver.PermissionDeniedError, match='may not run action "begin"'):
            c.transaction("w", 1).begin()
    with quiver.connect(f"grpc://{srv.flight_addr}", token="wrong") as c:
        with pytest.raises(quiver.UnauthenticatedError):
            c.health()


# --- continuous streams (issue #34) -----------------------------------------------


class FakeStreamServer(flight.FlightServerBase):
    """The stream side of the wire contract (docs/flight.md), in process:
    opening answer, a commit every `commit_every` batches received and
    every 20 ms while `hold` is clear, the closed answer. The call fails
    with Unavailable on the batches numbered in `fail_at` (1-based, counted
    over all calls; its uncommitted batches are lost, as in a server that
    stops), and with InvalidArgument on a seq in `refuse`. Every seq
    received is kept in `received`."""

    def __init__(self, commit_every: int = 2, fail_at: list[int] | None = None, refuse: set[int] | None = None) -> None:
        super().__init__("grpc://127.0.0.1:0")
        self.commit_every, self.fail_at, self.refuse = commit_every, list(fail_at or []), refuse or set()
        self.hold = threading.Event()
        self.durable: dict[str, int | None] = {}
        self.rows: list[Any] = []
        self.received: list[int] = []
        self.calls = 0

    def do_put(self, context: Any, descriptor: flight.FlightDescriptor, reader: Any, writer: Any) -> None:
        cmd = json.loads(descriptor.command)
        assert cmd["stream"] is True and cmd["endpoint"] == "events"
        self.calls += 1
        name = cmd["writer"]
        opened = self.durable.get(name)
        writer.write(pa.py_buffer(json.dumps({"writer": name, "durable_seq": opened}).encode()))
        pending: list[tuple[int, pa.RecordBatch]] = []
        lock = threading.Lock()
        ended = threading.Event()

        def commit(closed: bool) -> None:
            with lock:
                if pending or closed:
                    if pending:
                        self.durable[name] = pending[-1][0]
                        self.rows.extend(r for _, b in pending for r in b.column(0).to_pylist())
                    answer = {"durable_seq": self.durable.get(name), "rows": sum(b.num_rows for _, b in pending)}
                    if closed:
                        answer["closed"] = True
                    pending.clear()
                    writer.write(pa.py_buffer(json.dumps(answer).encode()))

        def ticker() -> None:
            while not ended.wait(0.02):
                if not self.hold.is_set():
                    commit(False)

        tick = threading.Thread(target=ticker, daemon=True)
        tick.start()
        try:
            last = -1
            for chunk in reader:
                seq = json.loads(chunk.app_metadata.to_pybytes())["seq"]
                self.received.append(seq)
                if self.fail_at and len(self.received) == self.fail_at[0]:
                    self.fail_at.pop(0)
                    raise flight.FlightUnavailableError("server stopping")
                if seq in self.refuse:
                    raise pa.ArrowInvalid(f"seq {seq} refused")
                if opened is not None and seq <= opened:
                    continue  # a replay
                if seq <= last:
                    raise pa.ArrowInvalid(f"seq {seq} after {last}")
                last = seq
                with lock:
                    pending.append((seq, chunk.data))
                    full = len(pending) >= self.commit_every
                if full:
                    commit(False)
        finally:
            ended.set()
            tick.join()
        commit(True)


def test_stream_resends_after_unavailable() -> None:
    """Client level, against FakeStreamServer: the call fails twice with
    Unavailable; the stream reconnects, drops what the opening answer says
    is durable, resends the rest in order, and every row lands once."""
    srv = FakeStreamServer(commit_every=2, fail_at=[6, 9])
    srv.hold.set()  # commits every 2 batches only: batch 5 is lost with the call
    durable: list[int] = []
    try:
        with quiver.connect(f"grpc://127.0.0.1:{srv.port}") as c:
            c_stream = c.stream("events", "w", on_durable=durable.append)
            c_stream.backoff_s = (0.01, 0.05)
            with c_stream as s:
                seqs = [s.write(pa.table({"id": pa.array([i], pa.int64())})) for i in range(10)]
                assert seqs == list(range(10))
                assert s.flush(timeout=10) == 9
            assert s.durable == 9
            with c.stream("events", "w", schema=pa.schema([("id", pa.int64())])) as again:
                assert again.durable == 9
                assert again.write(pa.table({"id": pa.array([10, 11], pa.int64())})) == 10
    finally:
        srv.shutdown()
    assert sorted(srv.rows) == list(range(12)), srv.rows
    assert s.reconnects == 2 and srv.calls == 4 and srv.received[:6] == [0, 1, 2, 3, 4, 5], srv.received
    assert durable == sorted(set(durable)) and durable[-1] == 9, durable


def test_stream_backpressure_flush_timeout_and_final_errors() -> None:
    """Client level: write blocks while the bytes not yet durable exceed
    max_inflight_bytes; flush raises quiver.TimeoutError while nothing
    commits, and returns the last seq once it does. An InvalidArgument
    ends the stream for good: no reconnect, raised by close."""
    srv = FakeStreamServer(commit_every=1000, refuse={7})
    srv.hold.set()
    batch = pa.table({"id": pa.array([1], pa.int64())})
    try:
        with quiver.connect(f"grpc://127.0.0.1:{srv.port}") as c:
            with c.stream("events", "w", max_inflight_bytes=1) as s:
                assert s.durable is None and s.write(batch) == 0
                second = threading.Thread(target=s.write, args=(batch,))
                second.start()
                time.sleep(0.3)
                assert second.is_alive(), "write did not block above max_inflight_bytes"
                with pytest.raises(quiver.TimeoutError, match="seq 0 not durable after 0.2s"):
                    s.flush(timeout=0.2)
                srv.hold.clear()
                second.join(10)
                assert not second.is_alive()
                assert s.flush(timeout=10) == 1 == s.durable

            s = c.stream("events", "refused")
            s.backoff_s = (0.01, 0.05)
            for i in range(9):
                s.write(batch)
            with pytest.raises(quiver.InvalidInputError, match="seq 7 refused"):
                s.flush(timeout=10)
            with pytest.raises(quiver.InvalidInputError, match="seq 7 refused"):
                s.write(batch)
            with pytest.raises(quiver.InvalidInputError, match="seq 7 refused"):
                s.close()
            with pytest.raises(ValueError, match="is closed"):
                s.write(batch)
    finally:
        srv.shutdown()
    assert srv.calls == 2


def streaming(name: str, root: Path) -> dict[str, Any]:
    """A delta endpoint whose streams commit every 100 ms."""
    return {**delta(name, root), "stream": {"commit_interval": "100ms"}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ids(first: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(first, first + n), pa.int64())})


@pytest.fixture(scope="module")
def stream_server(serve: Callable[..., Quiver], root: Path) -> Quiver:
    return serve([
        streaming("stream_events", root), streaming("stream_fenced", root), streaming("stream_txn", root),
        {**delta("stream_upsert", root, mode="upsert", merge_keys=["id"]), "stream": {"commit_interval": "100ms"}},
        {"name": "stream_lance", "sink": "lance", "lance": {"dataset_uri": f"file://{root / 'stream_lance'}"}, "stream": {"commit_interval": "100ms"}},
        {"name": "stream_merge", "sink": "lance", "lance": {"dataset_uri": f"file://{root / 'stream_merge'}", "mode": "merge_insert", "on": ["id"]},
         "stream": {"commit_interval": "100ms"}},
    ])


def test_stream_lance_read_by_pylance(stream_server: Quiver, root: Path) -> None:
    """Streams of several writers into a Lance append endpoint: pylance
    reads every row once, and each version's quiver.seqs property records
    the writers it advanced; into merge_insert and Delta upsert endpoints,
    the changelogs of one writer apply in seq order (the last value of a
    key wins), read back by pylance and delta-rs."""
    try:
        import lance
    except ImportError:
        require_tool("pylance", "pylance is not installed in .venv (requirements-test.txt)")
    with quiver.connect(f"grpc://{stream_server.flight_addr}") as c:
        streams = [c.stream("stream_lance", f"w{i}") for i in range(3)]
        for n in range(4):
            for i, s in enumerate(streams):
                s.write(ids(i * 1000 + n * 10, 10))
        for s in streams:
            s.close()
        assert [c.committed_epoch("stream_lance", f"w{i}") for i in range(3)] == [3, 3, 3]

        for endpoint in ("stream_merge", "stream_upsert"):
            with c.stream(endpoint, "changes") as s:
                for round in range(3):
                    s.write(pa.table({"id": pa.array(range(5), pa.int64()), "v": pa.array([round] * 5, pa.int64())}))
    ds = lance.dataset(str(root / "stream_lance"))
    got = sorted(ds.to_table().column("id").to_pylist())
    want = sorted(i * 1000 + n * 10 + k for i in range(3) for n in range(4) for k in range(10))
    assert got == want, f"{len(got)} rows, {len(set(got))} distinct"
    seqs: dict[str, int] = {}
    for v in ds.versions():
        t = ds.read_transaction(v["version"])
        if t is not None and "quiver.seqs" in (t.transaction_properties or {}):
            seqs.update(json.loads(t.transaction_properties["quiver.seqs"]))
    assert seqs == {"w0": 3, "w1": 3, "w2": 3}, seqs

    merged = lance.dataset(str(root / "stream_merge")).to_table().sort_by("id")
    assert merged.column("id").to_pylist() == list(range(5)) and merged.column("v").to_pylist() == [2] * 5, merged
    upserted = read(root, "stream_upsert").sort_by("id")
    assert upserted.column("id").to_pylist() == list(range(5)) and upserted.column("v").to_pylist() == [2] * 5, upserted


def test_stream_rows_land_once(stream_server: Quiver, root: Path) -> None:
    """Rows written through stream() land once; seqs start at 0 and go on
    from the durable seq in the next stream of the writer; flush returns
    the last seq; on_durable sees increasing seqs; an exception in the
    block still ends the stream cleanly and keeps what was written;
    committed-epoch answers the durable seq; a write without rows gets a
    seq too."""
    durable: list[int] = []
    with quiver.connect(f"grpc://{stream_server.flight_addr}") as c:
        with c.stream("stream_events", "collector-1", on_durable=durable.append) as s:
            assert [s.write(ids(i * 100, 100)) for i in range(5)] == [0, 1, 2, 3, 4]
            assert s.flush(timeout=30) == 4 == s.durable
            three = pa.Table.from_batches(ids(500, 300).to_batches(max_chunksize=100))
            assert s.write(three) == 7
        assert s.durable == 7
        assert durable == sorted(set(durable)) and durable[-1] == 7, durable

        with pytest.raises(RuntimeError, match="source failed"), c.stream("stream_events", "collector-1") as s:
            assert s.write(ids(800, 100)) == 8
            raise RuntimeError("source failed")
        assert s.durable == 8

        # With schema= the stream opens at once: durable says where the source resumes.
        with c.stream("stream_events", "collector-1", schema=ids(0, 0).schema) as s:
            assert s.durable == 8
            assert s.write(ids(900, 100)) == 9
            assert s.write(ids(0, 0)) == 10  # no rows: one empty batch, so that it has a seq
            assert s.flush(timeout=30) == 10
        assert c.committed_epoch("stream_events", "collector-1") == 10
    got = sorted(read(root, "stream_events").column("id").to_pylist())
    assert got == list(range(1000)), f"{len(got)} rows, {len(set(got))} distinct"
    # delta-rs reads the writer's durable seq from the txn action, as
    # kafka-delta-ingest's readers do.
    assert DeltaTable(str(root / "stream_events")).transaction_version("collector-1") == 10


def test_stream_fenced_by_a_second_stream(stream_server: Quiver, root: Path) -> None:
    """A second stream of the same writer fences the first: its next
    flush, write and close raise ConflictError (Aborted), and it does not
    reconnect; the second stream goes on from the durable seq."""
    with quiver.connect(f"grpc://{stream_server.flight_addr}") as c:
        first = c.stream("stream_fenced", "w")
        assert first.write(ids(0, 10)) == 0 and first.flush(timeout=30) == 0
        second = c.stream("stream_fenced", "w", schema=ids(0, 0).schema)
        assert second.durable == 0
        with pytest.raises(quiver.ConflictError):
            first.write(ids(10, 10))
            first.flush(timeout=30)
        with pytest.raises(quiver.ConflictError):
            first.close()
        with second:
            assert second.write(ids(100, 10)) >= 1
    got = read(root, "stream_fenced").column("id").to_pylist()
    assert len(got) == len(set(got)), "a row landed twice"
    assert set(range(10)) | set(range(100, 110)) <= set(got) <= set(range(20)) | set(range(100, 110)), sorted(got)


def test_stream_refused_for_a_transaction_writer(stream_server: Quiver) -> None:
    """A writer used for epoch transactions cannot stream: WrongStateError
    (FailedPrecondition), final."""
    with quiver.connect(f"grpc://{stream_server.flight_addr}") as c:
        with c.transaction("txn-writer", 1) as tx:
            tx.put("stream_txn", ids(0, 1))
        tx.commit()
        s = c.stream("stream_txn", "txn-writer")
        with pytest.raises(quiver.WrongStateError):
            s.write(ids(1, 1))
            s.flush(timeout=30)
        with pytest.raises(quiver.WrongStateError):
            s.close()


def test_stream_resumes_across_server_restarts(serve: Callable[..., Quiver], tmp_path: Path) -> None:
    """A writer thread streams while the server is stopped (SIGTERM) and
    started again on the same port and state, then killed -9 and started
    again: the stream reconnects each time, resends what was not durable,
    and every row lands exactly once."""
    endpoints = [streaming("events", tmp_path / "tables")]
    workdir, extra = tmp_path / "quiver", {"listen": f"127.0.0.1:{free_port()}"}
    srv = serve(endpoints, extra, workdir=workdir)
    n, rows = 400, 50
    errors: list[BaseException] = []
    durable: list[int] = []
    with quiver.connect(f"grpc://{srv.flight_addr}") as c:
        s = c.stream("events", "collector", on_durable=durable.append, reconnect_s=120)

        def produce() -> None:
            try:
                for i in range(n):
                    s.write(ids(i * rows, rows))
                    time.sleep(0.01)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        producer = threading.Thread(target=produce)
        producer.start()
        for restart in ("stop", "kill"):
            mark = (s.durable or 0) + 20
            poll_until(lambda: (s.durable or 0) >= mark or errors, 60)
            getattr(srv, restart)()
            time.sleep(0.3)  # the producer keeps writing into the stream's buffer
            srv = serve(endpoints, extra, workdir=workdir)
        producer.join(120)
        assert not errors, errors
        assert s.flush(timeout=60) == n - 1
        s.close()
        assert s.reconnects >= 2, s.reconnects
    assert durable == sorted(set(durable)) and durable[-1] == n - 1
    got = sorted(DeltaTable(str(tmp_path / "tables" / "events")).to_pyarrow_table().column("id").to_pylist())
    assert got == list(range(n * rows)), f"{len(got)} rows, {len(set(got))} distinct, {n * rows} sent"


def poll_until(cond: Callable[[], Any], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
