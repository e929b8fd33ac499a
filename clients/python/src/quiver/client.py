"""The Quiver client: connect(), Client, Transaction and their results."""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import random
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Callable, Iterable, Mapping, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from .errors import ConflictError, InvalidInputError, QuiverError, UnavailableError, WrongStateError, translate
from .errors import TimeoutError as DeadlineError  # the gRPC class; the builtin stays the builtin

__all__ = ["Ack", "Client", "Stream", "Transaction", "TxnResult", "connect", "DEFAULT_MAX_BATCH_BYTES"]

#: Batches larger than this are split before they are sent: a quarter of the
#: server's default limits.max_message_bytes (64 MiB), so that a batch never
#: reaches it.
DEFAULT_MAX_BATCH_BYTES = 16 << 20

# Actions that change nothing when repeated, retried on UnavailableError:
# begin, precommit, commit and rollback are idempotent per (writer, epoch)
# by the protocol (docs/transactions.md), the others only read.
_IDEMPOTENT = frozenset(
    {"begin", "precommit", "commit", "rollback", "status", "committed-epoch", "endpoints", "health"}
)

T = TypeVar("T")

#: What put() accepts.
Data = Any


@dataclass(frozen=True)
class Ack:
    """The final acknowledgement of a put. `committed` for an auto-commit put
    (the rows are published; `version` is the sink's version, None for
    sinks without versions); `staged` or `replayed` for a put in a
    transaction (`replayed`: the epoch had committed before, nothing was
    written). `raw` is the server's JSON."""

    rows: int
    version: int | None = None
    committed: bool = False
    staged: bool = False
    replayed: bool = False
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def _of(cls, raw: dict[str, Any]) -> "Ack":
        return cls(
            rows=int(raw.get("rows", 0)),
            version=raw.get("version"),
            committed=bool(raw.get("committed", False)),
            staged=bool(raw.get("staged", False)),
            replayed=bool(raw.get("replayed", False)),
            raw=raw,
        )


@dataclass(frozen=True)
class TxnResult:
    """A transaction's state after begin, precommit, commit, rollback or
    status: `state` is open, precommitted, committed or aborted;
    `replayed` is True when the epoch had committed before (the commit
    changed nothing); `attempt` names the attempt the answer is about (None
    when the server answered without one). `raw` is the server's JSON
    (participants with their descriptors, per-endpoint versions)."""

    writer: str
    epoch: int
    state: str
    replayed: bool = False
    attempt: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def _of(cls, raw: dict[str, Any]) -> "TxnResult":
        return cls(
            writer=raw["writer"],
            epoch=int(raw["epoch"]),
            state=raw["state"],
            replayed=bool(raw.get("replayed", False)),
            attempt=raw.get("attempt") or None,
            raw=raw,
        )


def connect(
    location: str,
    token: str | None = None,
    tls_root_certs: bytes | None = None,
    *,
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    retries: int = 3,
    timeout: float | None = None,
) -> "Client":
    """Connects to a Quiver server at `location` ("grpc://host:port", or
    "grpc+tls://host:port" with `tls_root_certs`, PEM bytes, to trust a
    private CA). `token` is sent as "authorization: Bearer <token>" on
    every call. Batches above `max_batch_bytes` are split (keep it below the
    server's limits.max_message_bytes); idempotent actions are retried up
    to `retries` times on UnavailableError; `timeout` (seconds) bounds
    every call but puts."""
    if max_batch_bytes < 1:
        raise ValueError("max_batch_bytes must be positive")
    kwargs: dict[str, Any] = {}
    if tls_root_certs is not None:
        kwargs["tls_root_certs"] = tls_root_certs
    try:
        fc = flight.connect(location, **kwargs)
    except Exception as e:  # pyarrow raises on a malformed location
        raise translate(e) from e
    return Client(fc, token=token, max_batch_bytes=max_batch_bytes, retries=retries, timeout=timeout)


class Client:
    """A connection to one Quiver server; build it with :func:`connect`.
    Safe to share between threads (each call is its own gRPC call)."""

    def __init__(
        self,
        fc: flight.FlightClient,
        *,
        token: str | None = None,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        retries: int = 3,
        timeout: float | None = None,
    ) -> None:
        self.flight = fc
        headers = [(b"authorization", b"Bearer " + token.encode())] if token else []
        self._put_options = flight.FlightCallOptions(headers=headers)
        self._options = flight.FlightCallOptions(headers=headers, timeout=timeout)
        self._max_batch_bytes = max_batch_bytes
        self._retries = retries

    def close(self) -> None:
        self.flight.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- puts ------------------------------------------------------------

    def put(self, endpoint: str, data: Data, *, on_ack: Callable[[dict[str, Any]], None] | None = None) -> Ack:
        """Auto-commit: every row of `data` lands in one sink commit, or none
        does. `data` is a pyarrow Table, RecordBatch or RecordBatchReader,
        an iterable of RecordBatch, or any object with __arrow_c_stream__
        (a pandas or Polars DataFrame). `on_ack` is called with each batch's
        ack ({"batch": n, "rows": r}) as the server confirms it, on a
        background thread. Never retried: if the connection drops after the
        last batch the outcome is unknown, and a retry could write the rows
        twice; use a transaction for exactly-once."""
        return self._put(flight.FlightDescriptor.for_path(endpoint), data, on_ack)

    def _put(self, descriptor: flight.FlightDescriptor, data: Data, on_ack: Callable[[dict[str, Any]], None] | None) -> Ack:
        reader = _reader(data)
        try:
            return Ack._of(self._stream(descriptor, reader, on_ack))
        except Exception as e:
            raise translate(e) from e

    def _stream(self, descriptor: flight.FlightDescriptor, reader: pa.RecordBatchReader, on_ack: Callable[[dict[str, Any]], None] | None) -> dict[str, Any]:
        # Acks are read on a second thread while batches go out, so that a
        # long stream never stalls on gRPC flow control.
        writer, metadata = self.flight.do_put(descriptor, reader.schema, options=self._put_options)
        got: dict[str, Any] = {"final": None, "error": None}

        def read_acks() -> None:
            try:
                while (buf := metadata.read()) is not None:
                    ack = json.loads(buf.to_pybytes())
                    if "batch" in ack:
                        if on_ack is not None:
                            on_ack(ack)
                    else:
                        got["final"] = ack
            except BaseException as e:  # also raised by writer.close() below
                got["error"] = e

        reading = threading.Thread(target=read_acks, name="quiver-acks", daemon=True)
        reading.start()
        failed: BaseException | None = None
        try:
            for batch in _split(reader, self._max_batch_bytes):
                writer.write_batch(batch)
            writer.done_writing()  # half-close: the server commits or stages
        except flight.FlightError:
            pass  # the server ended the stream: its error comes from close() or the acks
        except BaseException as e:  # the data failed (a generator raised, say)
            failed = e
            _abandon(writer)
        reading.join()
        if failed is not None:
            with contextlib.suppress(Exception):
                writer.close()  # raises the refusal _abandon provoked
            raise failed
        writer.close()  # raises the server's error, if any
        if got["error"] is not None:
            raise got["error"]
        if got["final"] is None:
            raise QuiverError("the stream ended without a final ack: the outcome is unknown")
        return got["final"]

    # --- continuous streams ---------------------------------------------------

    def stream(
        self,
        endpoint: str,
        writer: str,
        *,
        max_inflight_bytes: int = 64 << 20,
        on_durable: Callable[[int], None] | None = None,
        schema: pa.Schema | None = None,
        reconnect_s: float = 60.0,
    ) -> "Stream":
        """A continuous stream of `writer` to `endpoint` (docs/flight.md):
        one long DoPut whose batches the server commits every
        stream.commit_interval, each numbered by a seq that makes a resend
        after a reconnect exactly-once. See :class:`Stream`. With `schema`
        the stream opens here and waits for the server's opening answer,
        so that `durable` tells where the source resumes before the first
        write; without it the first write opens it."""
        return Stream(
            self, endpoint, writer, max_inflight_bytes=max_inflight_bytes, on_durable=on_durable,
            schema=schema, reconnect_s=reconnect_s,
        )

    # --- transactions and actions -----------------------------------------

    def transaction(self, writer: str, epoch: int) -> "Transaction":
        """The transaction (writer, epoch). Used as a context manager, it
        begins a new attempt on entry (fencing whatever an earlier attempt
        of the epoch left: a replay after a crash starts clean), is
        precommitted when the block ends without an exception, and its
        attempt is rolled back when one escapes; commit() it after that,
        once the rest of the pipeline's checkpoint is durable. Without
        `with`, the first put() begins (or call begin())."""
        return Transaction(self, writer, epoch)

    def action(self, name: str, body: dict[str, Any] | None = None) -> Any:
        """Runs one DoAction and returns its JSON result. Idempotent actions
        are retried on UnavailableError with exponential backoff."""
        payload = json.dumps(body or {}).encode()
        attempts = 1 + (self._retries if name in _IDEMPOTENT else 0)
        return _retrying(attempts, lambda: self._action_once(name, payload))

    def _action_once(self, name: str, payload: bytes) -> Any:
        try:
            results = list(self.flight.do_action(flight.Action(name, payload), options=self._options))
        except Exception as e:
            raise translate(e) from e
        if len(results) != 1:
            raise QuiverError(f"action {name}: expected one result, got {len(results)}")
        return json.loads(results[0].body.to_pybytes())

    def committed_epoch(self, endpoint: str, writer: str) -> int | None:
        """The writer's last committed epoch on endpoint, read from the sink;
        None if it never committed there."""
        return self.action("committed-epoch", {"endpoint": endpoint, "writer": writer})["epoch"]

    def endpoints(self) -> list[dict[str, Any]]:
        """The endpoints the token may use: name, sink, mode and schema."""
        return self.action("endpoints")

    def health(self) -> dict[str, Any]:
        """{"status": "ok" | "degraded", "endpoints": {...}, "journal": ...}."""
        return self.action("health")


class Transaction:
    """Exactly-once writes under (writer, epoch): put() stages rows
    invisibly, precommit() makes them durable, commit() publishes them.
    Replaying an epoch that already committed writes nothing and answers
    `replayed`. Epochs are integers >= 0 that only grow per writer.

    Every begin starts a new attempt of the epoch and fences the previous
    one (its staged rows are discarded). Once begun, the transaction names
    its attempt (`attempt`) in every put and in precommit, commit and
    rollback, so that it never acts on another attempt: a call on a fenced
    attempt is WrongStateError. One Transaction object is one attempt:
    share it (it is thread-safe) rather than making two for one epoch."""

    #: How long begin() retries while the server is still ending a fenced
    #: attempt's streams ("retry shortly"), in seconds.
    begin_retry_s = 30.0

    def __init__(self, client: Client, writer: str, epoch: int) -> None:
        self.client, self.writer, self.epoch = client, writer, epoch
        #: The attempt begun by begin() (or the first put), None before.
        self.attempt: str | None = None
        #: True once begin answered that the epoch had committed before.
        self.replayed = False
        self._lock = threading.Lock()

    def _key(self) -> dict[str, Any]:
        body: dict[str, Any] = {"writer": self.writer, "epoch": self.epoch}
        if self.attempt is not None:
            body["attempt"] = self.attempt
        return body

    def __enter__(self) -> "Transaction":
        with self._lock:
            if self.attempt is None:
                self._begin(None, False)
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if et is None:
            self.precommit()
            return
        try:
            self.rollback()
        except QuiverError:
            pass  # the first error is the one to see; the server's TTL cleans up

    def begin(self, ttl_s: int | None = None, *, resume: bool = False) -> TxnResult:
        """Begins a new attempt of the epoch, fencing the current one (an
        open attempt, or a precommitted one whose commit is not decided:
        its rows are discarded). With `resume`, a precommitted attempt is
        kept instead and answered (state "precommitted") so that commit()
        publishes it: what a pipeline restarting from a checkpoint that
        recorded the precommit wants. An epoch that had committed answers
        `replayed` (state "committed"); puts and commit then change
        nothing. `ttl_s` bounds an idle attempt (None: the server's
        txn.ttl). Retried for up to begin_retry_s while the server is still
        ending the fenced attempt's streams."""
        with self._lock:
            return self._begin(ttl_s, resume)

    def _begin(self, ttl_s: int | None, resume: bool) -> TxnResult:
        body: dict[str, Any] = {"writer": self.writer, "epoch": self.epoch}
        if ttl_s is not None:
            body["ttl_s"] = int(ttl_s)
        if resume:
            body["resume"] = True
        deadline = time.monotonic() + self.begin_retry_s
        pause = 0.05
        while True:
            try:
                res = TxnResult._of(self.client.action("begin", body))
                break
            except WrongStateError as e:
                if not _still_ending(e) or time.monotonic() + pause > deadline:
                    raise
                time.sleep(pause)
                pause = min(1.0, pause * 2)
        self.attempt, self.replayed = res.attempt, res.replayed
        return res

    def put(self, endpoint: str, data: Data, *, on_ack: Callable[[dict[str, Any]], None] | None = None) -> Ack:
        """Stages rows on endpoint in this transaction's attempt (begun
        here if it was not); Ack.staged, or Ack.replayed if the epoch had
        committed. A put that fails leaves the transaction to be rolled
        back and replayed: it is not retried here."""
        if self.attempt is None:
            with self._lock:
                if self.attempt is None:
                    self._begin(None, False)
        cmd = json.dumps({"endpoint": endpoint, **self._key()}).encode()
        return self.client._put(flight.FlightDescriptor.for_command(cmd), data, on_ack)

    def precommit(self) -> TxnResult:
        """Makes the staged rows durable but invisible; `raw["participants"]`
        holds the sealed descriptors other servers' commits can take."""
        return TxnResult._of(self.client.action("precommit", self._key()))

    def commit(self, descriptors: dict[str, list[str]] | None = None) -> TxnResult:
        """Publishes the transaction, with `descriptors` ({endpoint: [base64,
        ...]}) that other Quiver servers precommitted. Idempotent: retried on
        UnavailableError; a replayed epoch answers `replayed`. On
        OutcomeUnknownError, ask committed_epoch()."""
        body = self._key()
        if descriptors:
            body["descriptors"] = descriptors
        return TxnResult._of(self.client.action("commit", body))

    def rollback(self, *, give_up: bool = False) -> TxnResult:
        """Rolls back this transaction's attempt (or, if none was begun
        here, the epoch's current one). If a later attempt has fenced this
        one, the answer is that attempt's status, untouched. With `give_up`,
        also gives up the replay the epoch owes after the server undid its
        commit (every endpoint refused it): the writer's later epochs may
        then commit, and the epoch's rows are lost unless it is replayed
        before them."""
        body = self._key()
        if give_up:
            body["give_up"] = True
        return TxnResult._of(self.client.action("rollback", body))

    def status(self) -> TxnResult:
        return TxnResult._of(self.client.action("status", {"writer": self.writer, "epoch": self.epoch}))


class _Conn:
    """One DoPut call of a :class:`Stream`: its writer and what its answers
    said. The Stream's locks guard it."""

    def __init__(self, writer: flight.FlightStreamWriter, metadata: flight.FlightMetadataReader) -> None:
        self.writer, self.metadata = writer, metadata
        self.opened = False  # the opening answer arrived
        self.closed = False  # the answer with "closed": true arrived
        self.ended = False  # the call ended; error is its status (None: OK)
        self.error: BaseException | None = None
        self._finished = False

    def send(self, seq: int, batch: pa.RecordBatch) -> None:
        """Sends batch with its seq. A call the server has ended fails the
        write: ignored here, the call's reader reports its status."""
        try:
            self.writer.write_with_metadata(batch, json.dumps({"seq": seq}).encode())
        except (flight.FlightError, pa.ArrowException):
            pass

    def finish(self) -> None:
        """Ends the client's side (CloseSend), once."""
        if not self._finished:
            self._finished = True
            with contextlib.suppress(flight.FlightError, pa.ArrowException):
                self.writer.done_writing()


class Stream:
    """A continuous stream of one writer to one endpoint; build it with
    :meth:`Client.stream`. Every batch written gets the next sequence
    number (seq) of the writer: the first is the server's durable seq + 1
    (0 for a writer that never committed). The server commits the batches
    of all streams of an endpoint every stream.commit_interval and answers
    the durable seq; the stream keeps every batch until it is durable.

    When the connection is lost or the server stops (UnavailableError) the
    stream reconnects on its own thread, with backoff from 0.1 s capped at
    2 s, for up to `reconnect_s` seconds without a successful opening;
    the server's opening answer says which seq is durable, and the stream
    resends the batches after it, in order: each row lands exactly once.
    Other errors are final and raised by the next write(), flush() or
    close(): ConflictError (Aborted) when another stream of the same writer
    fenced this one, WrongStateError (FailedPrecondition) when the writer
    is used for transactions or the sink takes no streams,
    InvalidInputError (InvalidArgument) for a refused batch or schema.

    `on_durable(seq)` is called on the answers' thread each time a commit
    advances the durable seq (not for the seq the first opening answer
    states: read `durable`); an exception it raises fails the stream. Keep
    it short: answers wait for it.

    A context manager: close() on exit, also when an exception escapes the
    block (what was written is kept; the exception is the one raised).
    write() may be called from several threads; they are sent one at a
    time."""

    #: The first pause between reconnects and its cap, in seconds.
    backoff_s = (0.1, 2.0)

    def __init__(
        self,
        client: Client,
        endpoint: str,
        writer: str,
        *,
        max_inflight_bytes: int = 64 << 20,
        on_durable: Callable[[int], None] | None = None,
        schema: pa.Schema | None = None,
        reconnect_s: float = 60.0,
    ) -> None:
        if max_inflight_bytes < 1:
            raise ValueError("max_inflight_bytes must be positive")
        self.client, self.endpoint, self.writer = client, endpoint, writer
        cmd = json.dumps({"endpoint": endpoint, "writer": writer, "stream": True}).encode()
        self._descriptor = flight.FlightDescriptor.for_command(cmd)
        self._max_inflight = max_inflight_bytes
        self._on_durable = on_durable
        self._reconnect_s = reconnect_s
        self._cond = threading.Condition()  # guards the state below
        self._write_lock = threading.Lock()  # one write() or close() at a time
        self._send_lock = threading.Lock()  # one sender on the call at a time
        self._schema: pa.Schema | None = None
        self._pending: collections.deque[tuple[int, pa.RecordBatch, int]] = collections.deque()
        self._inflight = 0  # the bytes of _pending
        self._next_seq: int | None = None  # set by the first opening answer
        self._durable: int | None = None
        self._conn: _Conn | None = None  # the call batches go to
        self._thread: threading.Thread | None = None
        self._closing = False
        self._done = False  # the stream ended: closed, or failed with _error
        self._error: BaseException | None = None
        self._reconnected = False  # the current call opened (the backoff starts over)
        #: How many times the stream reopened after its first call ended.
        self.reconnects = 0
        if schema is not None:
            self._open(_portable_schema(schema))

    # --- the caller's side ---------------------------------------------------

    @property
    def durable(self) -> int | None:
        """The writer's last durable seq, None while none is (or before the
        stream opened)."""
        with self._cond:
            return self._durable

    @property
    def schema(self) -> pa.Schema | None:
        """The stream's schema, None before it opened."""
        return self._schema

    def write(self, data: Data) -> int:
        """Sends `data` (what put() accepts), each batch with the next seq,
        and returns the last seq assigned; data without rows is sent as one
        empty batch, so that every write has a seq. The first write opens
        the stream with its data's schema (waiting for the server's opening
        answer); later data must have the same schema. Blocks while the
        bytes written and not yet durable exceed max_inflight_bytes.
        Returning means sent, not durable: see flush() and on_durable."""
        reader = _reader(data)
        with self._write_lock:
            if self._closing:
                raise ValueError(f"stream {self.writer}@{self.endpoint} is closed")
            if self._schema is None:
                self._open(reader.schema)
            elif not reader.schema.equals(self._schema):
                raise InvalidInputError(
                    f"stream {self.writer}@{self.endpoint}: the data's schema differs from the stream's:\n"
                    f"{reader.schema}\nthe stream's:\n{self._schema}"
                )
            seq: int | None = None
            for batch in _split(reader, self.client._max_batch_bytes):
                seq = self._send(batch)
            if seq is None:
                seq = self._send(pa.RecordBatch.from_pylist([], schema=self._schema))
            return seq

    def flush(self, timeout: float | None = None) -> int | None:
        """Waits until every batch written is durable and returns the durable
        seq (None only if nothing was ever durable for the writer). Raises
        quiver.TimeoutError after `timeout` seconds, or the stream's error."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._pending:
                self._raise_error()
                if self._done:
                    raise QuiverError(f"stream {self.writer}@{self.endpoint} ended with seqs not durable")
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise DeadlineError(
                        f"stream {self.writer}@{self.endpoint}: seq {self._pending[-1][0]} not durable after "
                        f"{timeout}s (durable seq: {self._durable}, {len(self._pending)} batches waiting)",
                        "DEADLINE_EXCEEDED",
                    )
                self._cond.wait(remaining)
            self._raise_error()
            return self._durable

    def close(self) -> None:
        """Ends the stream: the server commits what it holds, answers
        "closed" and ends the call. Returns once every batch written is
        durable; raises the stream's error, if any. Idempotent."""
        with self._write_lock:
            with self._cond:
                self._closing = True
                conn, started = self._conn, self._thread is not None
            if started:
                with self._send_lock:
                    if conn is not None and conn is self._conn:
                        conn.finish()
                with self._cond:
                    while not self._done:
                        self._cond.wait()
        with self._cond:
            self._raise_error()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if et is None:
            self.close()
            return
        try:
            self.close()
        except QuiverError:
            pass  # the block's exception is the one to see

    # --- internals ------------------------------------------------------------

    def _raise_error(self) -> None:
        """Raises the stream's error; called with _cond held."""
        if self._error is not None:
            raise self._error

    def _open(self, schema: pa.Schema) -> None:
        """Starts the stream's thread and waits for the first opening answer."""
        self._schema = schema
        self._thread = threading.Thread(target=self._run, name=f"quiver-stream-{self.writer}", daemon=True)
        self._thread.start()
        with self._cond:
            while self._next_seq is None and not self._done:
                self._cond.wait()
            self._raise_error()
            if self._next_seq is None:
                raise QuiverError(f"stream {self.writer}@{self.endpoint} ended before it opened")

    def _send(self, batch: pa.RecordBatch) -> int:
        """Gives batch the next seq, keeps it until durable and sends it on
        the current call (during a reconnect, the reconnect sends it)."""
        size = batch.nbytes
        with self._cond:
            while self._inflight > self._max_inflight and self._error is None and not self._done:
                self._cond.wait()
            self._raise_error()
            if self._done:
                raise QuiverError(f"stream {self.writer}@{self.endpoint} has ended")
            assert self._next_seq is not None
            seq = self._next_seq
            self._next_seq += 1
            self._pending.append((seq, batch, size))
            self._inflight += size
            conn = self._conn
        with self._send_lock:
            # A reconnect since then has resent the batch (it swaps _conn
            # and takes the batches to resend under _send_lock).
            if conn is not None and conn is self._conn:
                conn.send(seq, batch)
        return seq

    def _run(self) -> None:
        """The stream's thread: opens a call, resends what is not durable,
        waits for its end and reconnects while it ends with
        UnavailableError."""
        pause, cap = self.backoff_s
        deadline: float | None = None
        while True:
            try:
                self._serve_one()
                self._finish(None)
                return
            except BaseException as e:  # noqa: BLE001 - every error ends or restarts the stream
                err = translate(e)
                if not isinstance(err, UnavailableError):
                    self._finish(err)
                    return
                now = time.monotonic()
                if deadline is None or self._reconnected:
                    deadline, pause = now + self._reconnect_s, self.backoff_s[0]
                if now + pause > deadline:
                    self._finish(err)
                    return
                time.sleep(pause * (0.5 + random.random() / 2))
                pause = min(cap, pause * 2)

    def _serve_one(self) -> None:
        """One call: open, resend, wait for its end; returns once closed."""
        self._reconnected = False
        writer, metadata = self.client.flight.do_put(self._descriptor, self._schema, options=self.client._put_options)
        conn = _Conn(writer, metadata)
        threading.Thread(target=self._read, args=(conn,), name=f"quiver-stream-acks-{self.writer}", daemon=True).start()
        with self._cond:
            while not conn.opened and not conn.ended:
                self._cond.wait()
        with self._send_lock:
            with self._cond:
                if not conn.opened:
                    raise conn.error or QuiverError(f"stream {self.writer}@{self.endpoint}: the call ended without an opening answer")
                if self._conn is not None:
                    self.reconnects += 1
                self._conn = conn
                batches = [(seq, batch) for seq, batch, _ in self._pending]
                closing = self._closing
                self._reconnected = True
            for seq, batch in batches:
                conn.send(seq, batch)
            if closing:
                conn.finish()
        with self._cond:
            while not conn.ended:
                self._cond.wait()
            if conn.error is not None:
                raise conn.error
            if not conn.closed:
                raise QuiverError(f"stream {self.writer}@{self.endpoint}: the server ended the call without a closed answer")
            if self._pending:
                raise QuiverError(
                    f"stream {self.writer}@{self.endpoint} closed at durable seq {self._durable}, "
                    f"but seqs {self._pending[0][0]}..{self._pending[-1][0]} were sent"
                )

    def _read(self, conn: _Conn) -> None:
        """Reads a call's answers (on its own thread), then its status."""
        err: BaseException | None = None
        try:
            while (buf := conn.metadata.read()) is not None:
                self._answer(conn, json.loads(buf.to_pybytes()))
        except BaseException as e:  # noqa: BLE001 - the call's status, or a bad answer
            err = e
        with self._send_lock:
            try:
                conn.writer.close()  # raises the call's status
            except BaseException as e:  # noqa: BLE001
                err = err or e
        with self._cond:
            conn.ended = True
            conn.error = None if err is None else _call_error(err)
            self._cond.notify_all()

    def _answer(self, conn: _Conn, answer: dict[str, Any]) -> None:
        """An answer of the server: the opening one, or a commit's."""
        seq = answer.get("durable_seq")
        first = False
        with self._cond:
            if not conn.opened:
                if self._next_seq is None:
                    first = True
                    self._next_seq = 0 if seq is None else int(seq) + 1
                elif seq is not None and int(seq) >= self._next_seq:
                    raise ConflictError(
                        f"stream {self.writer}@{self.endpoint}: the writer's durable seq is {seq}, beyond this "
                        f"stream's last seq {self._next_seq - 1}: another stream of the writer wrote meanwhile",
                        "ABORTED",
                    )
                elif self._durable is not None and (seq is None or int(seq) < self._durable):
                    raise QuiverError(
                        f"stream {self.writer}@{self.endpoint}: the server reopened at durable seq {seq}, behind "
                        f"seq {self._durable} it answered durable before: rows may be lost"
                    )
                conn.opened = True
            if answer.get("closed"):
                conn.closed = True
            advanced = seq is not None and (self._durable is None or int(seq) > self._durable)
            if advanced:
                self._durable = int(seq)
                while self._pending and self._pending[0][0] <= self._durable:
                    self._inflight -= self._pending.popleft()[2]
            self._cond.notify_all()
        # The first opening answer states where the writer was (durable);
        # on_durable reports what this stream's batches made durable.
        if advanced and not first and self._on_durable is not None:
            try:
                self._on_durable(int(seq))
            except Exception as e:  # noqa: BLE001 - a failing callback fails the stream
                with self._cond:
                    if self._error is None:
                        self._error = e
                    self._cond.notify_all()

    def _finish(self, err: BaseException | None) -> None:
        with self._cond:
            if err is not None and self._error is None:
                self._error = err
            self._done = True
            self._cond.notify_all()


def _call_error(err: BaseException) -> BaseException:
    """The QuiverError of the status a call ended with. translate() leaves
    Arrow's own classes alone (raised without a Flight message they come
    from the caller's data), but a call's status is the server's: a server
    built on pyarrow (Arrow status details) raises ArrowInvalid for
    InvalidArgument."""
    e = translate(err)
    if isinstance(e, QuiverError) or not isinstance(e, pa.ArrowException):
        return e
    if isinstance(e, pa.ArrowInvalid):
        return InvalidInputError(str(e))
    return QuiverError(str(e))


def _still_ending(e: QuiverError) -> bool:
    """Whether a begin was refused only because a fenced attempt's streams
    or rollbacks are still ending (the server says to retry shortly)."""
    return "retry shortly" in e.message or "still being rolled back" in e.message


def _abandon(writer: flight.FlightStreamWriter) -> None:
    """Makes the server fail the stream, so that nothing of it is published:
    pyarrow cannot cancel a DoPut, and closing the writer would end the
    stream cleanly, committing the batches sent so far. A message without
    an IPC header is refused by the server (docs/flight.md, "DoPut")."""
    with contextlib.suppress(Exception):
        writer.write_metadata(b'{"abandoned":true}')
        writer.done_writing()


def _retrying(attempts: int, call: Callable[[], T]) -> T:
    """call(), again after UnavailableError up to attempts times in all,
    with exponential backoff and jitter (0.1 s, 0.2 s, ... capped at 2 s)."""
    for attempt in itertools.count():
        try:
            return call()
        except UnavailableError:
            if attempt + 1 >= attempts:
                raise
            time.sleep(min(2.0, 0.1 * 2**attempt) * (0.5 + random.random() / 2))
    raise AssertionError("unreachable")


def _reader(data: Data) -> pa.RecordBatchReader:
    """A RecordBatchReader over any of the inputs put() accepts, with view
    types cast away (_portable)."""
    reader = _any_reader(data)
    target = _portable_schema(reader.schema)
    return reader if target.equals(reader.schema) else reader.cast(target)


def _portable_type(t: pa.DataType) -> pa.DataType:
    """t with string_view and binary_view (Polars' strings) replaced by
    large_string and large_binary, at every level: few Arrow
    implementations read view types yet, Quiver's Delta sink among them."""
    if pa.types.is_string_view(t):
        return pa.large_string()
    if pa.types.is_binary_view(t):
        return pa.large_binary()
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_portable_type(t.value_type)))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_portable_type(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_portable_type(f.type)) for f in t])
    return t


def _portable_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(_portable_type(f.type)) for f in schema], metadata=schema.metadata)


def _any_reader(data: Data) -> pa.RecordBatchReader:
    if isinstance(data, pa.RecordBatchReader):
        return data
    if isinstance(data, pa.Table):
        return data.to_reader()
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatchReader.from_batches(data.schema, [data])
    if hasattr(data, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(data)
    if isinstance(data, Iterable) and not isinstance(data, (str, bytes, Mapping)):
        batches = iter(data)
        first = next(batches, None)
        if first is None:
            raise ValueError("put: an empty iterable has no schema: pass a pyarrow Table or RecordBatchReader")
        if not isinstance(first, pa.RecordBatch):
            raise TypeError(f"put: an iterable must yield pyarrow.RecordBatch, got {type(first).__name__}")
        return pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], batches))
    raise TypeError(
        f"put: cannot send {type(data).__name__}: pass a pyarrow Table, RecordBatch or RecordBatchReader, "
        "an iterable of RecordBatch, or an object with __arrow_c_stream__ (pandas, Polars)"
    )


def _split(reader: pa.RecordBatchReader, max_bytes: int) -> Iterable[pa.RecordBatch]:
    """The batches of reader, each above max_bytes split by rows into
    slices of about max_bytes (a single row above it is sent alone, and the
    server's limit decides)."""
    for batch in reader:
        size = batch.nbytes
        if size <= max_bytes or batch.num_rows <= 1:
            yield batch
            continue
        rows = max(1, batch.num_rows * max_bytes // size)
        for offset in range(0, batch.num_rows, rows):
            yield batch.slice(offset, rows)
