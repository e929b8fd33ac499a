"""Send Arrow data to a Quiver server with the quiver package.

    pip install ./clients/python      # pyarrow is its one dependency
    python quiver_example.py --addr 127.0.0.1:8815 --endpoint devnull

(`make run` serves the discard endpoint "devnull" on 127.0.0.1:8815.) The
token, if the server has auth, comes from $QUIVER_TOKEN or --token; --tls-ca
names a PEM CA bundle and switches to TLS.

It shows the whole protocol: an auto-commit put with a progress callback,
and an exactly-once transaction that resumes after the writer's last
committed epoch, replayed once to show that a replay changes nothing.
"""

from __future__ import annotations

import argparse
import os

import pyarrow as pa

import quiver


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--addr", default="127.0.0.1:8815")
    p.add_argument("--token", default=os.environ.get("QUIVER_TOKEN"))
    p.add_argument("--tls-ca", default=None, help="PEM CA bundle; enables TLS")
    p.add_argument("--endpoint", default="devnull")
    p.add_argument("--writer", default="python-example")
    args = p.parse_args()

    certs = None
    if args.tls_ca:
        with open(args.tls_ca, "rb") as f:
            certs = f.read()
    scheme = "grpc+tls" if certs else "grpc"
    client = quiver.connect(f"{scheme}://{args.addr}", token=args.token, tls_root_certs=certs)

    print("health:", client.health()["status"])
    print("endpoints:", [e["name"] for e in client.endpoints()])
    table = pa.table({
        "id": pa.array(range(100_000), pa.int64()),
        "name": pa.array([f"user-{i}" for i in range(100_000)], pa.string()),
    })

    # Auto-commit: every row in one commit, or none. The server acks each
    # batch as it is written: a progress hook.
    ack = client.put(args.endpoint, table.to_reader(max_chunksize=25_000),
                     on_ack=lambda a: print(f"  batch {a['batch']}: {a['rows']} rows"))
    print("auto-commit:", ack)

    # Exactly-once: resume after the last committed epoch. The block
    # precommits when it ends (and rolls back if it raises); commit once
    # the rest of the checkpoint is durable.
    last = client.committed_epoch(args.endpoint, args.writer)
    epoch = 0 if last is None else last + 1
    with client.transaction(args.writer, epoch) as tx:
        print("staged:", tx.put(args.endpoint, table))
    print("commit:", tx.commit())

    # A replay of the same epoch (as after a crash) writes nothing.
    print("replayed put:", tx.put(args.endpoint, table))
    print("replayed commit:", tx.commit())
    client.close()


if __name__ == "__main__":
    main()
