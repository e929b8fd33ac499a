"""Concurrent writers: delta-rs or Spark append in a loop while Quiver
appends and upserts into the same table; every row is there exactly once
for both readers and the versions are contiguous."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pytest

from data import apply_changelog, changelog_schema, table
from helpers import Reader, Written, check_table, readers

SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.string()), ("round", pa.int64())])
SEED = range(100)  # the ids Quiver upserts; the other writer appends ids of its own
ROUNDS = {"delta-rs": 8, "spark": 4}  # appends by the other writer; Quiver does two rounds per append


def foreign_appender(writer: str, path: Path, request: pytest.FixtureRequest) -> Callable[[pa.Table], None]:
    """An append by the other writer, retried on a commit conflict: delta-rs
    1.6 fails a blind append that races a commit removing files ("a
    concurrent transaction deleted data this operation read"), as a client
    of it would see and retry."""
    if writer == "spark":
        spark = request.getfixturevalue("spark_session")
        return lambda t: spark.createDataFrame(t).coalesce(1).write.format("delta").mode("append").save(str(path))
    from deltalake import write_deltalake
    from deltalake.exceptions import CommitFailedError

    def append(t: pa.Table) -> None:
        for _ in range(20):
            try:
                return write_deltalake(str(path), t, mode="append")
            except CommitFailedError as e:
                if "concurrent transaction" not in str(e):
                    raise
        raise AssertionError("delta-rs: 20 commit conflicts in a row")

    return append


@pytest.fixture(scope="module", params=list(ROUNDS))
def concurrent(request: pytest.FixtureRequest, quiver: Any, tables: Path) -> Written:
    """The other writer appends ROUNDS batches as fast as it can; Quiver
    appends a batch and upserts the seed ids (updates and deletes) twice
    per append of the other writer, waiting for its progress in between, so
    that their commits interleave and race. Upserts that lose a race to an
    append into the data they read fail with Aborted and are sent again."""
    writer = request.param
    path = tables / f"concurrent_{writer}"
    srv = quiver(("append", {"table_uri": path}),
                 ("upsert", {"table_uri": path, "mode": "upsert", "merge_keys": ["id"]}))
    c = srv.client()
    seed = table(({"id": i, "writer": "quiver", "round": 0} for i in SEED), SCHEMA)
    acked = [c.put("append", seed)["version"]]
    state: dict[Any, dict[str, Any]] = {}
    apply_changelog(state, seed, ["id"])

    append = foreign_appender(writer, path, request)
    rounds = ROUNDS[writer]
    foreign = [table(({"id": 1_000_000 + r * 100 + i, "writer": writer, "round": r} for i in range(100)), SCHEMA)
               for r in range(rounds)]
    done = threading.Semaphore(0)
    errors: list[BaseException] = []

    def loop() -> None:
        try:
            for t in foreign:
                append(t)
                done.release()
        except BaseException as e:  # reported by the fixture
            errors.append(e)
            for _ in foreign:
                done.release()

    thread = threading.Thread(target=loop, name=f"{writer}-appender")
    thread.start()
    conflicts = 0
    for r in range(1, 2 * rounds + 1):
        t = table(({"id": 2_000_000 + r * 100 + i, "writer": "quiver", "round": r} for i in range(100)), SCHEMA)
        acked.append(c.put("append", t)["version"])
        apply_changelog(state, t, ["id"])
        changes = table(({"id": i, "writer": "quiver", "round": r, "_op": "D" if (i + r) % 17 == 0 else "U"}
                         for i in SEED), changelog_schema(SCHEMA))
        ack, n = c.put_retrying("upsert", changes)
        acked.append(ack["version"])
        conflicts += n
        apply_changelog(state, changes, ["id"])
        if r % 2 == 0:
            assert done.acquire(timeout=300), f"{writer} made no progress in 5 minutes"
    thread.join(timeout=300)
    assert not thread.is_alive() and not errors, errors
    for t in foreign:
        apply_changelog(state, t, ["id"])
    print(f"{writer}: {len(acked)} Quiver commits, {rounds} by {writer}, {conflicts} upserts sent again")
    # Every version is one of Quiver's acks or one of the other writer's appends.
    return Written(path, table(state.values(), SCHEMA), acked, commits=len(acked) + rounds)


@pytest.mark.parametrize("reader_name", readers())
def test_concurrent_writers(concurrent: Written, reader: Reader) -> None:
    check_table(reader, concurrent, last_writer_quiver=False)
