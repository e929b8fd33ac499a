"""Quiver on object storage, read by delta-rs: two `quiver serve`
processes append to one Delta table in a bucket of moto (the S3 emulator,
in server mode), their commits racing on S3's conditional writes, and
delta-rs reads the table from moto (storage_options). Every row is there
exactly once and the versions are contiguous."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pytest

from helpers import REPO, Quiver, poll

# moto accepts any credentials; the clients sign with these.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "quiver-test", "AWS_SECRET_ACCESS_KEY": "quiver-test", "AWS_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto of this .venv on a free loopback port, serving one request at a
    time as the Go tests' (moto_server itself lets racing conditional PUTs
    both win: internal/emulator/moto_serialized.py); its endpoint URL."""
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    script = REPO / "internal" / "emulator" / "moto_serialized.py"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(script), "127.0.0.1", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, f"moto_server exited:\n{log.read_text()}"
        try:
            urllib.request.urlopen(endpoint + "/", timeout=2).close()
            return True
        except (urllib.error.URLError, OSError):
            return False

    try:
        poll("moto_server", 90, up, log.read_text)
        yield endpoint
    finally:
        proc.kill()
        proc.wait()


def test_two_servers_one_s3_table(quiver_bin: Path, moto: str, tmp_path: Path) -> None:
    import boto3
    from deltalake import DeltaTable

    bucket = "quiver-interop"
    boto3.client("s3", endpoint_url=moto, **{k.lower(): v for k, v in CREDENTIALS.items() if k != "AWS_REGION"},
                 region_name="us-east-1").create_bucket(Bucket=bucket)
    table_uri = f"s3://{bucket}/events?region=us-east-1&endpoint={moto}&use_path_style=true"
    endpoints: list[dict[str, Any]] = [{"name": "events", "sink": "delta", "delta": {"table_uri": table_uri}}]
    env = {**CREDENTIALS, "AWS_EC2_METADATA_DISABLED": "true"}
    servers = [Quiver(quiver_bin, tmp_path / f"q{i}", endpoints, env=env) for i in range(2)]
    try:
        puts, rows = 8, 400
        batches = [pa.table({"id": pa.array(range(i * rows, (i + 1) * rows), pa.int64())}) for i in range(puts)]
        with ThreadPoolExecutor(puts) as pool:
            acks = list(pool.map(lambda i: servers[i % 2].client().put_retrying("events", batches[i]), range(puts)))
    finally:
        for srv in servers:
            srv.stop()

    table = DeltaTable(f"s3://{bucket}/events", storage_options={**CREDENTIALS, "AWS_ENDPOINT_URL": moto, "AWS_ALLOW_HTTP": "true"})
    ids = sorted(table.to_pyarrow_table().column("id").to_pylist())
    assert ids == list(range(puts * rows)), "every row exactly once"
    assert sorted(h["version"] for h in table.history()) == list(range(puts)), "one version per put, contiguous"
    assert sorted(ack["version"] for ack, _ in acks) == list(range(puts)), acks
