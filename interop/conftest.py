"""Fixtures of the interop suite: the quiver binary, Quiver servers, one
SparkSession with Delta Lake, and the readers (delta-rs, Spark)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from helpers import DeltaRs, Quiver, Reader, Spark, go_build, require_tool, start_spark


@pytest.fixture(scope="session")
def quiver_bin() -> Path:
    """bin/quiver as `make test-interop` built it (QUIVER_BIN), or built here
    with go into .cache/quiver."""
    if path := os.environ.get("QUIVER_BIN"):
        assert Path(path).is_file(), f"QUIVER_BIN={path} does not exist"
        return Path(path)
    return go_build("./server/cmd/quiver", "quiver")


@pytest.fixture(scope="session")
def serve(quiver_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Quiver]]:
    """Starts `quiver serve` with endpoints as configured (a list of
    endpoint sections), extra top-level config keys and environment
    variables, in a fresh workdir or in the given one (a restart on the
    same journal), and returns it; every server is stopped at the end of
    the session."""
    servers: list[Quiver] = []

    def start(endpoints: list[dict[str, Any]], extra: dict[str, Any] | None = None,
              env: dict[str, str] | None = None, workdir: Path | None = None) -> Quiver:
        srv = Quiver(quiver_bin, workdir or tmp_path_factory.mktemp("quiver"), endpoints, extra, env)
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.stop()


@pytest.fixture(scope="session")
def quiver(serve: Callable[..., Quiver]) -> Callable[..., Quiver]:
    """Starts `quiver serve` with the given delta endpoints (name and delta
    section; table_uri may be a Path) and returns it."""

    def start(*endpoints: tuple[str, dict[str, Any]]) -> Quiver:
        eps = []
        for name, delta in endpoints:
            delta = dict(delta)
            if isinstance(delta["table_uri"], Path):
                delta["table_uri"] = "file://" + str(delta["table_uri"])
            eps.append({"name": name, "sink": "delta", "delta": delta})
        return serve(eps)

    return start


@pytest.fixture(scope="session")
def tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the session's tables."""
    return tmp_path_factory.mktemp("tables")


@pytest.fixture(scope="session")
def spark_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One SparkSession with Delta Lake for the whole run: local[2], small
    memory, no UI, two shuffle partitions, session time zone UTC, Parquet's
    vectorized reader as by default."""
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        require_tool("java", "Spark needs Java 17 (apt-get install openjdk-17-jre-headless)")
    session = start_spark(tmp_path_factory.mktemp("spark"), "quiver-interop")
    assert session.conf.get("spark.sql.parquet.enableVectorizedReader") == "true"
    yield session
    session.stop()


@pytest.fixture
def reader(request: pytest.FixtureRequest, reader_name: str) -> Reader:
    """The reader named by the test's reader_name parameter (helpers.readers)."""
    if reader_name == "spark":
        return Spark(request.getfixturevalue("spark_session"))
    return DeltaRs()

