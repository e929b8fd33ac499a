"""librdkafka (confluent-kafka) reads what Quiver's Kafka sink wrote to a
real Apache Kafka broker, read_committed: JSON values, Avro values in the
Confluent wire format decoded by confluent-kafka's AvroDeserializer against
the Schema Registry Quiver registered with, keys and murmur2 partitions as
librdkafka's murmur2_random partitioner computes them, the upsert envelope's
keys and tombstones, committed transactions and invisible rolled-back ones,
and dead letters. The broker and the registry come from
internal/realkafka/cmd/kafkaenv (the registry is srfake, which serves the
REST calls confluent-kafka's SchemaRegistryClient makes)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
import uuid
from typing import Any, Callable, Iterator

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

import quiver
from helpers import Quiver, go_build, require_tool

PARTITIONS = 3
READ_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def kafka() -> Iterator[dict[str, Any]]:
    """The broker ({"plain": host:port, ...}) and the registry URL, up
    until the module ends (kafkaenv stops them when its stdin closes)."""
    binary = go_build("./internal/realkafka/cmd/kafkaenv", "kafkaenv")
    proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # kafkaenv bounds the broker's start (2 minutes)
        assert line, f"kafkaenv exited with {proc.wait()} before describing the broker"
        env = json.loads(line)
        if env.get("no_java"):
            require_tool("java", env["error"])
        yield env
    finally:
        if proc.stdin:
            proc.stdin.close()
        proc.wait(timeout=60)


@pytest.fixture(scope="module")
def topics(kafka: dict[str, Any]) -> dict[str, str]:
    """Topics of this module's endpoints, created with confluent-kafka's
    admin client: 3 partitions; the upsert and dead-letter endpoints' topics
    compacted (a compacted topic refuses keyless records, which the sink
    diverts to the uncompacted DLQ)."""
    run = uuid.uuid4().hex[:8]
    names = {k: f"{k}-{run}" for k in ("json", "avro", "upsert", "dlq", "dead", "murmur")}
    compacted = {"cleanup.policy": "compact"}
    admin = AdminClient({"bootstrap.servers": kafka["broker"]["plain"]})
    futures = admin.create_topics([
        NewTopic(name, PARTITIONS, 1, config=compacted if k in ("upsert", "dlq") else {})
        for k, name in names.items()
    ])
    for f in futures.values():
        f.result(timeout=30)
    return names


@pytest.fixture(scope="module")
def server(serve: Callable[..., Quiver], kafka: dict[str, Any], topics: dict[str, str]) -> Quiver:
    def ep(name: str, **cfg: Any) -> dict[str, Any]:
        return {"name": name, "sink": "kafka", "kafka": {
            "brokers": [kafka["broker"]["plain"]], "topic": topics[name],
            "marker_topic": f"_quiver_commits-{topics['json']}", **cfg}}

    return serve([
        ep("json", key_column="user"),
        ep("avro", key_column="user", format="avro", schema_registry={"url": kafka["registry"]}),
        ep("upsert", key_column="id", envelope="upsert"),
        ep("dlq", key_column="user", dlq_topic=topics["dead"]),
    ])


@pytest.fixture(scope="module")
def client(server: Quiver) -> Iterator[quiver.Client]:
    c = quiver.connect(f"grpc://{server.flight_addr}")
    yield c
    c.close()


def read_committed(kafka: dict[str, Any], topic: str, enough: Callable[[list[Any]], bool]) -> list[Any]:
    """Every record of topic a read_committed librdkafka consumer sees once
    enough(records) holds and it has reached the end (the last stable
    offset) of every partition, within READ_TIMEOUT_S (a real broker writes
    a transaction's markers just after its commit answers)."""
    c = Consumer({
        "bootstrap.servers": kafka["broker"]["plain"], "group.id": f"interop-{uuid.uuid4().hex}",
        "isolation.level": "read_committed", "enable.auto.commit": False,
        "enable.partition.eof": True, "auto.offset.reset": "earliest",
    })
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got: list[Any] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + READ_TIMEOUT_S
        while not enough(got) or len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, f"{topic}: {len(got)} records read_committed are not enough, partitions at end {at_end}"
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            got.append(msg)
        return got
    finally:
        c.close()


def count(n: int) -> Callable[[list[Any]], bool]:
    return lambda got: len(got) >= n


def murmur2_partitions(kafka: dict[str, Any], topic: str, keys: list[bytes]) -> dict[bytes, int]:
    """The partition librdkafka's murmur2_random partitioner (the Java
    client's default) picks for each key, found by producing it."""
    p = Producer({"bootstrap.servers": kafka["broker"]["plain"], "partitioner": "murmur2_random"})
    got: dict[bytes, int] = {}

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        got[msg.key()] = msg.partition()

    for k in keys:
        p.produce(topic, key=k, value=b"", on_delivery=delivered)
    assert p.flush(30) == 0
    return got


USERS = ["alice", "bob", "carol", "dave", "erin", "frank"]


def rows(start: int, n: int) -> pa.Table:
    return pa.table({
        "user": [USERS[i % len(USERS)] for i in range(start, start + n)],
        "n": pa.array(range(start, start + n), pa.int64()),
        "amount": [i * 0.5 for i in range(start, start + n)],
        "ts": pa.array([dt.datetime(2026, 12, 3, 12, 0, i % 60, i, tzinfo=dt.timezone.utc) for i in range(start, start + n)],
                       pa.timestamp("us", tz="UTC")),
    })


def test_json_keys_and_murmur2_partitions(kafka: dict[str, Any], topics: dict[str, str], client: quiver.Client) -> None:
    assert client.put("json", rows(0, 60)).committed
    got = read_committed(kafka, topics["json"], count(60))
    values = sorted((json.loads(m.value()) for m in got), key=lambda v: v["n"])
    assert [v["n"] for v in values] == list(range(60))
    assert values[7] == {"user": "bob", "n": 7, "amount": 3.5, "ts": "2026-12-03T12:00:07.000007Z"}
    assert all(json.loads(m.value())["user"].encode() == m.key() for m in got)
    expected = murmur2_partitions(kafka, topics["murmur"], [u.encode() for u in USERS])
    assert len(set(expected.values())) > 1, "the keys should spread over partitions"
    assert {(m.key(), m.partition()) for m in got} == set(expected.items())


def test_avro_through_the_registry(kafka: dict[str, Any], topics: dict[str, str], client: quiver.Client) -> None:
    assert client.put("avro", rows(0, 20)).committed
    got = read_committed(kafka, topics["avro"], count(20))
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": kafka["registry"]}))
    values = []
    for m in got:
        assert m.value()[0] == 0, "Confluent wire format: magic byte 0, then the schema id"
        v = deserialize(m.value(), SerializationContext(m.topic(), MessageField.VALUE))
        assert v["user"].encode() == m.key()
        values.append(v)
    values.sort(key=lambda v: v["n"])
    assert [v["n"] for v in values] == list(range(20))
    assert values[3] == {"user": "dave", "n": 3, "amount": 1.5,
                         "ts": dt.datetime(2026, 12, 3, 12, 0, 3, 3, tzinfo=dt.timezone.utc)}


def test_upsert_envelope_keys_and_tombstones(kafka: dict[str, Any], topics: dict[str, str], client: quiver.Client) -> None:
    # One batch, collapsed per key (last row wins): k1 updated, k2 deleted.
    changes = pa.table({
        "id": ["k1", "k2", "k3", "k1", "k2"],
        "v": pa.array([1, 2, 3, 10, 0], pa.int64()),
        "_op": ["I", "I", "I", "U", "D"],
    })
    assert client.put("upsert", changes).committed
    got = {m.key(): m.value() for m in read_committed(kafka, topics["upsert"], count(3))}
    assert got == {b"k1": b'{"id":"k1","v":10}', b"k2": None, b"k3": b'{"id":"k3","v":3}'}


def test_transactions_read_committed(kafka: dict[str, Any], topics: dict[str, str], client: quiver.Client) -> None:
    # Rolled back after precommit: its records are in the log, in an
    # aborted Kafka transaction, and never visible.
    aborted = client.transaction("interop-kafka", 1)
    with aborted:
        aborted.put("json", rows(1000, 12))
    aborted.rollback()
    committed = client.transaction("interop-kafka", 2)
    with committed:
        committed.put("json", rows(2000, 12))
    assert committed.commit().state == "committed"
    assert committed.commit().replayed
    # The same users as every earlier put: every partition that holds an
    # aborted record also holds committed ones after it.
    def second_in(msgs: list[Any]) -> bool:
        return sum(json.loads(m.value())["n"] >= 2000 for m in msgs) >= 12

    got = [json.loads(m.value())["n"] for m in read_committed(kafka, topics["json"], second_in)]
    assert not [n for n in got if 1000 <= n < 1012], "records of a rolled-back transaction are visible"
    assert sorted(n for n in got if n >= 2000) == list(range(2000, 2012))
    assert client.committed_epoch("json", "interop-kafka") == 2


def test_dead_letters(kafka: dict[str, Any], topics: dict[str, str], client: quiver.Client) -> None:
    # The topic is compacted: the broker refuses keyless records, so the
    # sink sends the rows with a null user to the dead-letter topic.
    table = pa.table({"user": ["alice", None, "bob", None], "n": pa.array([1, 2, 3, 4], pa.int64())})
    assert client.put("dlq", table).committed
    kept = read_committed(kafka, topics["dlq"], count(2))
    assert sorted(json.loads(m.value())["n"] for m in kept) == [1, 3]
    dead = read_committed(kafka, topics["dead"], count(2))
    assert sorted(json.loads(m.value())["n"] for m in dead) == [2, 4]
    for m in dead:
        headers = dict(m.headers())
        assert m.key() is None
        assert headers["__dlq.topic"] == topics["dlq"].encode()
        assert b"compact" in headers["__dlq.error"], headers
