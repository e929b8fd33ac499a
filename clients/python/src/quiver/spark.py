"""Exactly-once writes from Spark Structured Streaming: a `foreachBatch`
function that writes every micro-batch to Quiver in one transaction.

    from quiver.spark import foreach_batch_writer

    (spark.readStream.format("parquet").schema(schema).load("in/")
        .writeStream
        .foreachBatch(foreach_batch_writer("grpc://quiver:8815", ["events", "latest"]))
        .option("checkpointLocation", "chk/")
        .start())

The transaction is (writer, epoch) = (the query's writer name, batch_id).
Spark runs a batch again after a crash with the same batch_id and the same
input (the offsets are in the checkpoint before the batch runs), so:

- a crash before Quiver's commit: the rerun's begin fences what the crashed
  run staged or precommitted, and commits the batch once;
- a crash after Quiver's commit but before Spark recorded the batch: the
  rerun's begin answers "replayed", its puts and commit change nothing.

docs/clients.md, "Spark Structured Streaming", has the details.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import pyarrow as pa

from .client import Client, connect

__all__ = ["foreach_batch_writer", "default_writer", "to_arrow"]

#: The Spark local property holding a streaming query's id, set by Spark on
#: the thread running each micro-batch (StreamExecution.QUERY_ID_KEY); the
#: id is stored in the checkpoint, so it survives restarts from it.
QUERY_ID_PROPERTY = "sql.streaming.queryId"

# Tests only: QUIVER_SPARK_TEST_PAUSE=<point>:<batch_id> (point: put,
# precommit or commit) makes the batch write QUIVER_SPARK_TEST_MARKER (a
# file) after that point and sleep, so that a test can kill the driver
# there. Unset, nothing happens.
_PAUSE_ENV = "QUIVER_SPARK_TEST_PAUSE"
_MARKER_ENV = "QUIVER_SPARK_TEST_MARKER"


def foreach_batch_writer(
    location: str,
    endpoints: str | Iterable[str],
    writer: str | None = None,
    **client_options: Any,
) -> Callable[[Any, int], None]:
    """Returns fn(batch_df, batch_id) for DataStreamWriter.foreachBatch:
    every row of the batch goes to each of `endpoints` (one name or a list)
    of the Quiver server at `location`, in one transaction (writer,
    batch_id) that commits every endpoint or none, exactly once across
    driver crashes and restarts from the checkpoint.

    `writer` names the transaction's producer; it must be the same across
    restarts of the query and differ between queries (a second query
    under the same writer has its batches dropped as replayed). Default:
    default_writer(), from the query id Spark keeps in the checkpoint.
    `client_options` go to quiver.connect (token, tls_root_certs,
    max_batch_bytes, retries, timeout); the connection is made on the
    first batch and reused.

    An empty batch still begins, precommits and commits its epoch. A batch
    refused by the server (a null merge key of an upsert endpoint, a
    schema mismatch) raises, failing the query; nothing of it is published
    on any endpoint, and a restart retries it."""
    names = [endpoints] if isinstance(endpoints, str) else list(endpoints)
    if not names:
        raise ValueError("foreach_batch_writer: name at least one endpoint")
    state: dict[str, Client] = {}

    def write(batch_df: Any, batch_id: int) -> None:
        if "client" not in state:
            state["client"] = connect(location, **client_options)
        client = state["client"]
        name = writer or default_writer(batch_df, names)
        table = to_arrow(batch_df)
        epoch = int(batch_id)
        with client.transaction(name, epoch) as tx:
            for ep in names:
                tx.put(ep, table)
            _test_pause("put", epoch)
        _test_pause("precommit", epoch)
        tx.commit()
        _test_pause("commit", epoch)

    return write


def default_writer(batch_df: Any, endpoints: list[str]) -> str:
    """"spark-<query id>-<endpoints>": the id of the streaming query running
    the batch (Spark's local property sql.streaming.queryId, kept in the
    checkpoint: the same after a restart, another one for a new checkpoint)
    and the endpoints joined by "+" (hashed when long), so that two
    foreachBatch writers of one query do not share a writer."""
    session = batch_df.sparkSession
    query_id = session.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
    if not query_id:
        active = session.streams.active
        if len(active) != 1:
            raise RuntimeError(
                f"quiver.spark: cannot tell which streaming query runs this batch (no local property "
                f"{QUERY_ID_PROPERTY}, {len(active)} active queries): pass writer= explicitly"
            )
        query_id = str(active[0].id)
    eps = "+".join(endpoints)
    if len(eps) > 64:
        eps = hashlib.sha256(eps.encode()).hexdigest()[:16]
    return f"spark-{query_id}-{eps}"


def to_arrow(df: Any) -> pa.Table:
    """The rows of a Spark DataFrame as a pyarrow Table with the frame's
    schema: DataFrame.toArrow() (PySpark >= 4), else through pandas
    (toPandas with Arrow enabled), cast back to the Spark schema: nullable
    integers stay integers (pandas made them floats), and timestamps,
    which toPandas gives naive in the session time zone, are localized to
    it and stored as UTC instants."""
    if hasattr(df, "toArrow"):
        return df.toArrow()
    import pandas as pd
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(df.schema, timezone="UTC")
    session = df.sparkSession
    tz = session.conf.get("spark.sql.session.timeZone")
    key = "spark.sql.execution.arrow.pyspark.enabled"
    before = session.conf.get(key, "false")
    session.conf.set(key, "true")
    try:
        frame = df.toPandas()
    finally:
        session.conf.set(key, before)
    for f in schema:
        col = frame[f.name]
        if pa.types.is_timestamp(f.type) and f.type.tz is not None and pd.api.types.is_datetime64_dtype(col) \
                and getattr(col.dt, "tz", None) is None:
            frame[f.name] = col.dt.tz_localize(tz)
    return pa.Table.from_pandas(frame, schema=schema, preserve_index=False, safe=True)


def _test_pause(point: str, epoch: int) -> None:
    want = os.environ.get(_PAUSE_ENV, "")
    if want != f"{point}:{epoch}":
        return
    marker = os.environ.get(_MARKER_ENV)
    if marker:
        Path(marker).write_text(f"{point}:{epoch}\n")
    time.sleep(3600)
