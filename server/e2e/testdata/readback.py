"""Reads a Delta table and a Lance dataset on S3 with the reference
implementations, for server/e2e's scale-out test: delta-rs (deltalake),
pylance and LanceDB, each from the S3 endpoint given (the emulator), with
the credentials of the environment (AWS_ACCESS_KEY_ID, ...).

Usage: python readback.py ENDPOINT s3://bucket/delta-table s3://bucket/dataset.lance

Prints one JSON object: per reader the table's version and its sorted id
column; for delta-rs also the versions of the table's history.
"""

import json
import os
import sys

import lance
import lancedb
from deltalake import DeltaTable


def main() -> None:
    endpoint, table_uri, dataset_uri = sys.argv[1:4]
    # object_store's settings, which delta-rs, pylance and LanceDB share.
    opts = {
        "aws_access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"],
        "aws_region": os.environ["AWS_REGION"],
        "aws_endpoint": endpoint,
        "allow_http": "true",
    }
    ids = lambda t: sorted(t.column("id").to_pylist())  # noqa: E731

    table = DeltaTable(table_uri, storage_options=opts)
    dataset = lance.dataset(dataset_uri, storage_options=opts)
    root, _, name = dataset_uri.rpartition("/")
    db_table = lancedb.connect(root, storage_options=opts).open_table(name.removesuffix(".lance"))
    print(json.dumps({
        "delta-rs": {"version": table.version(), "history": sorted(h["version"] for h in table.history()),
                     "ids": ids(table.to_pyarrow_table(columns=["id"]))},
        "pylance": {"version": dataset.version, "ids": ids(dataset.to_table(columns=["id"]))},
        "lancedb": {"version": db_table.version, "ids": ids(db_table.to_arrow())},
    }))


if __name__ == "__main__":
    main()
