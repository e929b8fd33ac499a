"""Send Arrow data to a Quiver server with pyarrow.flight.

Quiver speaks plain Arrow Flight, so pyarrow is all a Python producer needs
(pip install pyarrow). This file shows the whole protocol:

* put():          an auto-commit DoPut. Every batch of the stream lands in
                  one commit when the stream ends, or nothing does.
* Transaction:    exactly-once writes under (writer, epoch): put() stages
                  rows invisibly, precommit() makes them durable, commit()
                  publishes them. Replaying an epoch that already committed
                  succeeds and changes nothing (the results say "replayed").
* action():       any DoAction (status, committed-epoch, endpoints, health).

Run it against a server (e.g. `make run`, which serves the discard endpoint
"devnull" on 127.0.0.1:8815):

    python quiver_example.py --addr 127.0.0.1:8815 --endpoint devnull

The token, if the server has auth, comes from $QUIVER_TOKEN or --token.
"""

import argparse
import json
import os
import threading

import pyarrow as pa
import pyarrow.flight as flight


def connect(addr, tls_ca=None):
    """Returns a FlightClient for host:port, with TLS if a CA file is given."""
    if tls_ca:
        with open(tls_ca, "rb") as f:
            return flight.connect("grpc+tls://" + addr, tls_root_certs=f.read())
    return flight.connect("grpc://" + addr)


def call_options(token):
    """Sends `authorization: Bearer <token>` on every call (nothing without a token)."""
    headers = [(b"authorization", b"Bearer " + token.encode())] if token else []
    return flight.FlightCallOptions(headers=headers)


def _do_put(client, descriptor, reader, options, on_batch=None):
    """Streams every batch of `reader` (a pyarrow.RecordBatchReader) and
    returns the final acknowledgement as a dict.

    The server answers one ack per batch ({"batch": N, "rows": R}) and a final
    one. Acks are read on a background thread while the batches go out, so a
    long stream never stalls on gRPC flow control; on_batch(ack) is called
    for each batch ack on that thread.
    """
    writer, metadata = client.do_put(descriptor, reader.schema, options=options)
    acks = {"final": None, "error": None}

    def read_acks():
        try:
            while True:
                buf = metadata.read()
                if buf is None:  # the server ended the stream
                    return
                ack = json.loads(buf.to_pybytes())
                if "batch" in ack:
                    if on_batch:
                        on_batch(ack)
                else:
                    acks["final"] = ack
        except Exception as e:  # surfaced by writer.close() below as well
            acks["error"] = e

    reading = threading.Thread(target=read_acks, daemon=True)
    reading.start()
    try:
        for batch in reader:
            writer.write_batch(batch)
        # Half-close: tells the server the stream is complete, which is what
        # makes it commit (auto-commit) or stage (transaction).
        writer.done_writing()
        reading.join()
    finally:
        # close() raises the server's error (pyarrow.flight.FlightError or
        # pyarrow.ArrowInvalid for InvalidArgument) if the stream failed.
        writer.close()
    if acks["error"] is not None:
        raise acks["error"]
    if acks["final"] is None:
        raise RuntimeError("the stream ended without a final ack: the outcome is unknown")
    return acks["final"]


def put(client, endpoint, data, options, on_batch=None):
    """Auto-commit: returns {"committed": true, "rows": N, "version": V?}.

    `data` is a pyarrow.Table or RecordBatchReader. If the connection drops
    after the last batch, the outcome is unknown and a retry may write the
    rows twice; use a Transaction for exactly-once.
    """
    reader = data.to_reader() if isinstance(data, pa.Table) else data
    return _do_put(client, flight.FlightDescriptor.for_path(endpoint), reader, options, on_batch)


def action(client, name, body, options):
    """Runs one DoAction and returns its JSON result as a dict."""
    results = list(client.do_action(flight.Action(name, json.dumps(body).encode()), options=options))
    if len(results) != 1:
        raise RuntimeError(f"action {name}: expected one result, got {len(results)}")
    return json.loads(results[0].body.to_pybytes())


class Transaction:
    """Transaction (writer, epoch): epochs are integers >= 0 that only grow
    per writer. Several puts, also to several endpoints, may join one
    transaction."""

    def __init__(self, client, writer, epoch, options):
        self.client, self.writer, self.epoch, self.options = client, writer, epoch, options

    def _key(self):
        return {"writer": self.writer, "epoch": self.epoch}

    def begin(self, ttl_s=None):
        """Optional: the first put begins the transaction with the server's TTL."""
        body = self._key()
        if ttl_s is not None:
            body["ttl_s"] = int(ttl_s)
        return action(self.client, "begin", body, self.options)

    def put(self, endpoint, data, on_batch=None):
        """Stages rows; returns {"staged": true, ...} or {"replayed": true, ...}."""
        cmd = json.dumps({"endpoint": endpoint, **self._key()}).encode()
        reader = data.to_reader() if isinstance(data, pa.Table) else data
        return _do_put(self.client, flight.FlightDescriptor.for_command(cmd), reader, self.options, on_batch)

    def precommit(self):
        """Makes staged rows durable but invisible; returns the participants
        with their base64 descriptors."""
        return action(self.client, "precommit", self._key(), self.options)

    def commit(self, descriptors=None):
        """Publishes the transaction. `descriptors` ({endpoint: [base64, ...]})
        adds what other Quiver servers precommitted to the same table commit.
        Idempotent. If the call fails with an unknown outcome, ask
        committed_epoch() before deciding to commit again or replay."""
        body = self._key()
        if descriptors:
            body["descriptors"] = descriptors
        return action(self.client, "commit", body, self.options)

    def rollback(self):
        return action(self.client, "rollback", self._key(), self.options)

    def status(self):
        return action(self.client, "status", self._key(), self.options)


def committed_epoch(client, endpoint, writer, options):
    """The writer's last committed epoch on endpoint, read from the sink, or None."""
    return action(client, "committed-epoch", {"endpoint": endpoint, "writer": writer}, options)["epoch"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--addr", default="127.0.0.1:8815")
    p.add_argument("--token", default=os.environ.get("QUIVER_TOKEN", ""))
    p.add_argument("--tls-ca", default=None, help="PEM CA bundle; enables TLS")
    p.add_argument("--endpoint", default="devnull")
    p.add_argument("--writer", default="python-example")
    args = p.parse_args()

    client = connect(args.addr, args.tls_ca)
    opts = call_options(args.token)
    table = pa.table({
        "id": pa.array(range(100_000), pa.int64()),
        "name": pa.array([f"user-{i}" for i in range(100_000)], pa.string()),
    })

    print("endpoints:", action(client, "endpoints", {}, opts))

    # Auto-commit, in batches of 65,536 rows (one gRPC message each).
    ack = put(client, args.endpoint, table.to_reader(max_chunksize=65_536), opts,
              on_batch=lambda a: print("  batch ack", a))
    print("auto-commit:", ack)

    # Exactly-once: resume after the last committed epoch.
    last = committed_epoch(client, args.endpoint, args.writer, opts)
    tx = Transaction(client, args.writer, 0 if last is None else last + 1, opts)
    print("staged:", tx.put(args.endpoint, table))
    print("precommit:", tx.precommit()["state"])
    print("commit:", tx.commit())
    # A replay of the same epoch (as after a crash) changes nothing.
    print("replayed put:", tx.put(args.endpoint, table))
    print("replayed commit:", tx.commit())
    client.close()


if __name__ == "__main__":
    main()
