"""ADBC's Flight SQL driver (adbc-driver-flightsql) against `quiver serve`
unchanged: adbc_ingest auto-commit and in committed and rolled-back
transactions (read back by delta-rs), adbc_get_objects, and the errors
ADBC users meet."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from helpers import Quiver


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("adbc")


@pytest.fixture(scope="module")
def server(serve: Callable[..., Quiver], root: Path) -> Quiver:
    return serve([
        {"name": "ingest", "sink": "delta", "delta": {"table_uri": f"file://{root / 'ingest'}"}},
        {"name": "snap", "sink": "delta", "delta": {"table_uri": f"file://{root / 'snap'}", "mode": "overwrite"}},
    ])


@pytest.fixture
def conn(server: Quiver) -> Iterator[Any]:
    """A DBAPI connection in autocommit mode."""
    with flight_sql.connect(f"grpc://{server.flight_addr}", autocommit=True) as c:
        yield c


def rows(root: Path, name: str) -> list[dict[str, Any]]:
    if not (root / name).exists():
        return []
    return sorted(DeltaTable(str(root / name)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


def batch(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})


def test_ingest_autocommit(conn: Any, root: Path) -> None:
    with conn.cursor() as cur:
        assert cur.adbc_ingest("ingest", batch(1, 2, 3), mode="append") == 3
        assert cur.adbc_ingest("ingest", batch(4).to_batches()[0], mode="create_append") == 1
    assert [r["id"] for r in rows(root, "ingest")] == [1, 2, 3, 4]


def test_ingest_in_transactions(server: Quiver, root: Path) -> None:
    """DBAPI's default: a transaction per connection, ended by commit() or
    rollback() (Flight SQL BeginTransaction and EndTransaction)."""
    before = [r["id"] for r in rows(root, "ingest")]
    with flight_sql.connect(f"grpc://{server.flight_addr}") as conn:
        ingest_commit_rollback(conn, root, before)


def ingest_commit_rollback(conn: Any, root: Path, before: list[int]) -> None:
    with conn.cursor() as cur:
        assert cur.adbc_ingest("ingest", batch(10, 11), mode="append") == 2
    assert [r["id"] for r in rows(root, "ingest")] == before  # invisible until the commit
    conn.commit()
    assert [r["id"] for r in rows(root, "ingest")] == before + [10, 11]
    with conn.cursor() as cur:
        cur.adbc_ingest("ingest", batch(12), mode="append")
    conn.rollback()
    assert [r["id"] for r in rows(root, "ingest")] == before + [10, 11]


def test_replace_on_an_overwrite_endpoint(conn: Any, root: Path) -> None:
    with conn.cursor() as cur:
        cur.adbc_ingest("snap", batch(1, 2), mode="replace")
        cur.adbc_ingest("snap", batch(3), mode="replace")
    assert [r["id"] for r in rows(root, "snap")] == [3]


def test_get_objects(conn: Any) -> None:
    with conn.cursor() as cur:
        cur.adbc_ingest("ingest", batch(20), mode="append")  # the table and its schema exist
    objects = conn.adbc_get_objects().read_all().to_pylist()
    assert [c["catalog_name"] for c in objects] == ["quiver"]
    schemas = objects[0]["catalog_db_schemas"]
    assert [s["db_schema_name"] for s in schemas] == ["public"]
    tables = {t["table_name"]: t for t in schemas[0]["db_schema_tables"]}
    assert sorted(tables) == ["ingest", "snap"]
    assert [c["column_name"] for c in tables["ingest"]["table_columns"]] == ["id", "name"]
    assert conn.adbc_get_table_schema("ingest").names == ["id", "name"]
    assert conn.adbc_get_info()["vendor_name"] == "Quiver"


def test_catalog_and_schema_names(conn: Any, root: Path) -> None:
    """adbc_ingest may name the catalog and schema the listings show (and
    nothing else); get_objects filters by them."""
    before = len(rows(root, "ingest"))
    with conn.cursor() as cur:
        assert cur.adbc_ingest("ingest", batch(30), mode="append", catalog_name="quiver", db_schema_name="public") == 1
        with pytest.raises(adbc_driver_manager.ProgrammingError, match=r'schema "analytics" is unknown: .*"public" \(flight_sql.db_schema\)'):
            cur.adbc_ingest("ingest", batch(31), mode="append", db_schema_name="analytics")
        with pytest.raises(adbc_driver_manager.ProgrammingError, match=r'catalog "main" is unknown: .*"quiver" \(flight_sql.catalog\)'):
            cur.adbc_ingest("ingest", batch(32), mode="append", catalog_name="main")
    assert len(rows(root, "ingest")) == before + 1
    assert conn.adbc_get_objects(catalog_filter="main").read_all().num_rows == 0
    listed = conn.adbc_get_objects(depth="db_schemas", catalog_filter="quiver", db_schema_filter="pub%").read_all().to_pylist()
    assert [[s["db_schema_name"] for s in c["catalog_db_schemas"]] for c in listed] == [["public"]]


@pytest.mark.parametrize("table, mode, error, fragment", [
    ("ingest", "create", adbc_driver_manager.ProgrammingError, 'table "ingest" exists'),
    # FailedPrecondition, which ADBC reports as an OperationalError
    ("ingest", "replace", adbc_driver_manager.OperationalError, "only overwrite endpoints replace"),
    ("snap", "append", adbc_driver_manager.OperationalError, "ingest with mode replace"),
    ("nope", "append", adbc_driver_manager.ProgrammingError, 'unknown endpoint "nope"'),
])
def test_ingest_errors(conn: Any, table: str, mode: str, error: type[Exception], fragment: str) -> None:
    with conn.cursor() as cur, pytest.raises(error, match=fragment):
        cur.adbc_ingest(table, batch(1), mode=mode)


def test_queries_are_unsupported(conn: Any) -> None:
    with conn.cursor() as cur, pytest.raises(adbc_driver_manager.NotSupportedError, match="CommandStatementIngest"):
        cur.execute("SELECT 1")
