"""Quiver's Lance sink against the newest Lance core on PyPI (pylance and
lancedb, pinned in requirements-test.txt): pylance reads the 2.1 and 2.2
datasets Quiver writes exactly, Quiver merges into a dataset pylance created
with its defaults (format 2.2) as pylance's merge_insert does, also after
pylance mutated it, and a dataset of an unstable ("next") format leaves its
endpoint unavailable with the reason while the server serves the others."""

from __future__ import annotations

import datetime as dt
import decimal
import shutil
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 (pa.compute)
import pyarrow.flight as flight
import pytest

from helpers import Quiver, require_tool

try:
    import lance
    import lancedb
except ImportError:
    lance = lancedb = None


@pytest.fixture(autouse=True)
def _reference_tools() -> None:
    if lance is None or lancedb is None:
        require_tool("pylance", "pylance and lancedb are not installed in .venv (requirements-test.txt)")

CATEGORIES = ["books", "games", "music", "video", "garden", "tools", "toys", "food"]


def workload(start: int, n: int, seed: int = 1) -> pa.Table:
    """Rows like the standard workload, plus a vector, a nullable struct and
    a list of strings (with null and empty lists)."""
    rng = np.random.default_rng(seed + start)
    ids = np.arange(start, start + n, dtype=np.int64)
    base = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789"))
    names = ["".join(rng.choice(letters, size=int(k))) for k in rng.integers(8, 25, n)]
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 8).astype(np.float32)), 8)
    st = pa.array([None if i % 17 == 0 else {"a": int(i), "b": None if i % 5 == 0 else f"b{i % 11}"} for i in ids],
                  pa.struct([("a", pa.int64()), ("b", pa.string())]))
    tags = [None if i % 11 == 0 else [CATEGORIES[(i + j) % 8] for j in range(i % 4)] for i in ids]
    return pa.table({
        "id": pa.array(ids),
        "tags": pa.array(tags, pa.list_(pa.string())),
        "ts": pa.array([base + dt.timedelta(milliseconds=int(i)) for i in ids], pa.timestamp("us", tz="UTC")),
        "user_id": pa.array(rng.integers(0, 1_000_001, n, dtype=np.int64)),
        "amount": pa.array(np.round(rng.random(n) * 1000.0, 2)),
        "name": pa.array([None if i % 13 == 0 else s for i, s in zip(ids, names)], pa.string()),
        "category": pa.array([CATEGORIES[k] for k in rng.integers(0, len(CATEGORIES), n)], pa.string()),
        "active": pa.array(rng.random(n) < 0.5),
        "vec": vec,
        "st": st,
    })


def sorted_rows(t: pa.Table) -> pa.Table:
    return t.sort_by("id")


def assert_same(got: pa.Table, want: pa.Table, who: str) -> None:
    got, want = sorted_rows(got), sorted_rows(want)
    assert got.num_rows == want.num_rows, f"{who}: {got.num_rows} rows, want {want.num_rows}"
    for name in want.column_names:
        g = got.column(name).combine_chunks()
        w = want.column(name).combine_chunks().cast(g.type)
        assert g.equals(w), f"{who}: column {name} differs"


def lance_endpoint(name: str, path: Path, **opts: Any) -> dict[str, Any]:
    return {"name": name, "sink": "lance", "lance": {"dataset_uri": "file://" + str(path), **opts}}


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in (path / "data").glob("*.lance"))


@pytest.mark.parametrize("version", ["2.1", "2.2", None])
def test_pylance_reads_quiver_datasets(serve: Callable[..., Quiver], tables: Path, version: str | None) -> None:
    """Two auto-commit puts into a new dataset of each format (None: the
    default, 2.2); pylance and lancedb read every row back as sent, and the
    data files are about as large as pylance's own for the same rows."""
    name = f"fmt-{version or 'default'}"
    path = tables / f"{name}.lance"
    opts = {"data_storage_version": version} if version else {}
    q = serve([lance_endpoint("items", path, **opts)])
    parts = [workload(0, 6000), workload(6000, 3000)]
    for t in parts:
        q.client().put("items", t)
    want = pa.concat_tables(parts)
    ds = lance.dataset(str(path))
    assert ds.data_storage_version == (version or "2.2")
    assert_same(ds.to_table(), want, "pylance")
    tbl = lancedb.connect(str(tables)).open_table(name)
    assert tbl.count_rows() == want.num_rows
    assert_same(tbl.to_arrow(), want, "lancedb")
    # The same rows written by pylance in the same format, in two files.
    ref = tables / f"{name}-pylance.lance"
    lance.write_dataset(parts[0], str(ref), data_storage_version=version or "2.2")
    lance.write_dataset(parts[1], str(ref), mode="append")
    ratio = dir_bytes(path) / dir_bytes(ref)
    print(f"{name}: Quiver {dir_bytes(path)} bytes, pylance {dir_bytes(ref)} bytes, ratio {ratio:.2f}")
    assert ratio <= 1.1, f"Quiver's data files are {ratio:.2f}x pylance's"
    # pylance deletes rows and adds a column; Quiver goes on appending.
    ds.delete("id < 100")
    ds.add_columns({"amount2": "amount * 2"})
    more = workload(9000, 500)
    more = more.append_column("amount2", pa.compute.multiply(more.column("amount"), 2))
    q.client().put("items", more)
    got = lance.dataset(str(path)).to_table()
    assert got.num_rows == want.num_rows - 100 + 500
    assert_same(got.filter(pa.compute.field("id") >= 9000), more, "after add_columns")


def wide_and_sparse() -> tuple[pa.Table, pa.Table]:
    """Rows whose values are too wide for Lance's mini-block chunks (every
    5th string and binary over 8 KiB, large strings, lists of them with
    null and empty lists, 12 KiB vectors, with nulls), and very sparse
    lists (a value every 300 rows; two values 70,000 rows apart)."""
    n = 400
    text = [None if i % 7 == 3 else (f"row {i} is long; " * (600 + i) if i % 5 == 0 else f"short {i}") for i in range(n)]
    rng = np.random.default_rng(5)
    blobs = [None if i % 7 == 3 else rng.bytes(9000 + i if i % 5 == 1 else 5) for i in range(n)]
    docs = [None if i % 6 == 2 else [] if i % 6 == 4 else [t for t in text[i:i + 1 + i % 3]] for i in range(n)]
    emb = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 3072).astype(np.float32)), 3072,
                                            mask=pa.array([i % 4 == 2 for i in range(n)]))
    wide = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "doc": pa.array(text, pa.string()),
        "blob": pa.array(blobs, pa.binary()),
        "big": pa.array(text[1:] + [None], pa.large_string()),
        "docs": pa.array(docs, pa.list_(pa.string())),
        "st": pa.array([None if i % 9 == 8 else {"k": i, "text": text[(i + 2) % n]} for i in range(n)],
                       pa.struct([("k", pa.int32()), ("text", pa.string())])),
        "emb": emb,
    })
    m = 80_000
    sparse = pa.table({
        "id": pa.array(range(m), pa.int64()),
        "ints": pa.array([[i << 20, i] if i % 300 == 299 else None if i % 3 == 0 else [] for i in range(m)], pa.list_(pa.int64())),
        "rare": pa.array([[f"value {i}"] if i in (5, 75_005) else None if i % 2 else [] for i in range(m)], pa.list_(pa.string())),
    })
    return wide, sparse


def test_pylance_reads_full_zip_and_sparse_lists(serve: Callable[..., Quiver], tables: Path) -> None:
    """Values wider than a mini-block chunk (Quiver writes them full-zip)
    and very sparse lists (smaller chunks, or full-zip) in 2.1 and 2.2:
    pylance and lancedb read every row back as sent."""
    wide, sparse = wide_and_sparse()
    eps = {f"{kind}{v[-1]}": (tables / f"{kind}-{v}.lance", v) for kind in ("wide", "sparse") for v in ("2.1", "2.2")}
    q = serve([lance_endpoint(name, path, data_storage_version=v) for name, (path, v) in eps.items()])
    for name, (path, v) in eps.items():
        t = wide if name.startswith("wide") else sparse
        q.client().put(name, t)
        ds = lance.dataset(str(path))
        assert ds.data_storage_version == v
        assert_same(ds.to_table(), t, f"pylance {name}")
        assert_same(lancedb.connect(str(tables)).open_table(path.stem).to_arrow(), t, f"lancedb {name}")
    # pylance appends to Quiver's dataset and reads both writers' rows.
    path = eps["wide2"][0]
    lance.write_dataset(wide, str(path), mode="append")
    assert lance.dataset(str(path)).count_rows() == 2 * wide.num_rows


def test_merge_insert_into_pylance_dataset(serve: Callable[..., Quiver], tables: Path) -> None:
    """A dataset pylance created with its defaults (2.2): Quiver's
    merge_insert (update_all + insert_all on id) gives the rows pylance's
    merge_insert gives on a copy, also after pylance deleted, updated and
    compacted the dataset and created a BTREE and an IVF_PQ index on it;
    the indices survive Quiver's merge and still answer."""
    base = workload(0, 5000, seed=7)
    ours, theirs = tables / "merge-q.lance", tables / "merge-p.lance"
    lance.write_dataset(base, str(ours))
    assert lance.dataset(str(ours)).data_storage_version == "2.2"
    shutil.copytree(ours, theirs)
    q = serve([lance_endpoint("m", ours, mode="merge_insert", on=["id"])])

    def merge_both(src: pa.Table) -> None:
        q.client().put("m", src)
        (lance.dataset(str(theirs)).merge_insert("id")
         .when_matched_update_all().when_not_matched_insert_all().execute(src))
        assert_same(lance.dataset(str(ours)).to_table(), lance.dataset(str(theirs)).to_table(), "merge")

    src = workload(4000, 2000, seed=8)  # 1000 updates, 1000 inserts
    merge_both(src)
    for path in (ours, theirs):  # the same mutations by pylance on both
        ds = lance.dataset(str(path))
        ds.delete("id % 10 = 3")
        ds.update({"amount": "amount + 1"}, where="id < 500")
        ds.optimize.compact_files(target_rows_per_fragment=100_000)
    ds = lance.dataset(str(ours))  # and indices on Quiver's
    ds.create_scalar_index("id", "BTREE")
    ds.create_index("vec", "IVF_PQ", num_partitions=2, num_sub_vectors=2)
    merge_both(workload(5500, 1500, seed=9))
    ds = lance.dataset(str(ours))
    assert len(ds.describe_indices()) == 2, ds.describe_indices()
    assert ds.to_table(nearest={"column": "vec", "q": [0.5] * 8, "k": 5}).num_rows == 5
    assert ds.to_table(filter="id = 5600").num_rows == 1


def test_next_format_endpoint_unavailable(serve: Callable[..., Quiver], tables: Path) -> None:
    """A dataset of Lance's unstable next format: its endpoint answers
    why it cannot be written, the server serves the other endpoint."""
    nxt, ok = tables / "next.lance", tables / "ok.lance"
    lance.write_dataset(workload(0, 100), str(nxt), data_storage_version="next")
    version = lance.dataset(str(nxt)).data_storage_version
    assert version not in ("2.0", "2.1", "2.2")
    q = serve([lance_endpoint("next", nxt), lance_endpoint("ok", ok)])
    with pytest.raises((flight.FlightError, pa.ArrowException)) as e:
        q.client().put("next", workload(100, 10))
    assert f"Lance file format {version}" in str(e.value) and "next" in str(e.value), str(e.value)
    q.client().put("ok", workload(0, 10))
    assert lance.dataset(str(ok)).count_rows() == 10


def _types() -> list[tuple[str, pa.Array, str]]:
    """(name, column of 40 rows with nulls, Quiver's answer for a new
    dataset): "2.2" / "2.0" stored in that format, or "refused"."""
    n = 40
    ints = list(range(n))

    def nulls(values: list[Any], typ: pa.DataType) -> pa.Array:
        return pa.array([None if i % 7 == 3 else v for i, v in enumerate(values)], typ)

    words = [f"w{i % 5}" for i in ints]
    return [
        ("dictionary", nulls(words, pa.string()).dictionary_encode(), "2.2"),
        ("categorical", pa.DictionaryArray.from_arrays(pa.array([None if i % 7 == 3 else i % 3 for i in ints], pa.int8()),
                                                       pa.array(["red", "green", "blue"])), "2.2"),
        ("decimal128", nulls([decimal.Decimal(i) / 100 for i in ints], pa.decimal128(10, 2)), "2.2"),
        ("decimal256", nulls([decimal.Decimal(i) / 100 for i in ints], pa.decimal256(40, 2)), "2.2"),
        ("time32", nulls([i * 1000 for i in ints], pa.time32("ms")), "2.2"),
        ("time64", nulls([i * 1000 for i in ints], pa.time64("us")), "2.2"),
        ("date64", nulls([dt.date(2026, 1, 1) + dt.timedelta(days=i) for i in ints], pa.date64()), "2.2"),
        ("duration", nulls(ints, pa.duration("ms")), "2.2"),
        ("float16", nulls([np.float16(i / 4) for i in ints], pa.float16()), "2.2"),
        ("struct", nulls([{"a": i, "b": f"s{i}"} for i in ints], pa.struct([("a", pa.int32()), ("b", pa.string())])), "2.2"),
        ("vector_f32", nulls([[float(i)] * 4 for i in ints], pa.list_(pa.float32(), 4)), "2.2"),
        ("vector_f16", nulls([[np.float16(i)] * 4 for i in ints], pa.list_(pa.float16(), 4)), "2.2"),
        ("list", nulls([list(range(i % 4)) for i in ints], pa.list_(pa.int64())), "2.2"),
        ("large_list", nulls([list(range(i % 4)) for i in ints], pa.large_list(pa.int64())), "2.2"),
        ("list_of_struct", nulls([[{"x": j, "y": None if j == 1 else str(j)} for j in range(i % 3)] for i in ints],
                                 pa.list_(pa.struct([("x", pa.int32()), ("y", pa.string())]))), "2.2"),
        ("list_of_list", nulls([[list(range(j)) for j in range(i % 3)] for i in ints], pa.list_(pa.list_(pa.int16()))), "2.2"),
        ("map", nulls([{"k": i, "z": None if i % 3 else i} for i in ints], pa.map_(pa.string(), pa.int64())), "2.2"),
    ]


@pytest.mark.parametrize("name,column,answer", _types(), ids=[t[0] for t in _types()])
def test_types_against_pylance(serve: Callable[..., Quiver], tables: Path, name: str, column: pa.Array, answer: str) -> None:
    """Each Arrow type a pandas, Polars or pyarrow user sends, into a new
    dataset: pylance stores every one; Quiver stores it (pylance and
    lancedb read it back equal) or refuses it with InvalidArgument naming
    the column."""
    t = pa.table({"id": pa.array(range(len(column)), pa.int64()), name: column})
    ref = tables / f"type-{name}-pylance.lance"
    lance.write_dataset(t, str(ref))
    assert_same(lance.dataset(str(ref)).to_table(), t, f"pylance {name}")
    path = tables / f"type-{name}.lance"
    q = serve([lance_endpoint("t", path)])
    if answer == "refused":
        with pytest.raises((flight.FlightError, pa.ArrowException)) as e:
            q.client().put("t", t)
        assert "invalid" in str(e.value).lower() and name in str(e.value), str(e.value)
        return
    q.client().put("t", t)
    ds = lance.dataset(str(path))
    assert ds.data_storage_version == answer
    assert_same(ds.to_table(), t, f"Quiver {name}")
    assert_same(lancedb.connect(str(tables)).open_table(path.stem).to_arrow(), t, f"lancedb, Quiver {name}")


def test_dictionary_stream_bytes(serve: Callable[..., Quiver], tables: Path) -> None:
    """A categorical column sent as a Flight stream of 200 batches of
    1,000 rows over one 20,000-entry dictionary (sent once): Quiver's pages
    share it instead of each holding a copy (59.7x pylance's bytes), so its
    file is about as large as pylance's for the same batches, and pylance
    reads every row back."""
    n, k = 200_000, 20_000
    cats = pa.array([f"city number {i:06d} of the long list" for i in range(k)])
    idx = pa.array(np.random.default_rng(1).integers(0, k, n).astype(np.int32))
    t = pa.table({"id": pa.array(range(n), pa.int64()), "c": pa.DictionaryArray.from_arrays(idx, cats)})
    t = pa.Table.from_batches(t.to_batches(max_chunksize=1000))
    path, ref = tables / "dict-stream.lance", tables / "dict-stream-pylance.lance"
    q = serve([lance_endpoint("d", path)])
    q.client().put("d", t)
    lance.write_dataset(t, str(ref), data_storage_version="2.2")
    ratio = dir_bytes(path) / dir_bytes(ref)
    print(f"dictionary stream: Quiver {dir_bytes(path)} bytes, pylance {dir_bytes(ref)} bytes, ratio {ratio:.2f}")
    assert ratio <= 1.5, f"Quiver's data files are {ratio:.2f}x pylance's"
    got = lance.dataset(str(path)).to_table().sort_by("id")
    assert got.column("c").combine_chunks().dictionary_decode().equals(t.column("c").combine_chunks().dictionary_decode())


def page_encodings(path: Path) -> dict[str, set[str]]:
    """Per column of a dataset's data files, the encodings of its pages as
    pylance reports them: the names in each page's encoding tree, e.g.
    "Fsst Variable Flat" (byte strings such as FSST tables left out)."""
    import re

    import lance.file

    names = lance.dataset(str(path)).schema.names
    out: dict[str, set[str]] = {n: set() for n in names}
    for f in sorted((path / "data").glob("*.lance")):
        for i, col in enumerate(lance.file.LanceFileReader(str(f)).metadata().columns):
            for page in col.pages:
                text = re.sub(r'b"(?:[^"\\]|\\.)*"', "", str(page.encoding))
                kinds = re.findall(r"\b([A-Z][A-Za-z0-9]+)\b\s*[({]", text)
                skip = {"Some", "CompressiveEncoding", "PageLayout", "MiniBlockLayout"}
                out[names[i]].add(" ".join(dict.fromkeys(k for k in kinds if k not in skip)))
    return out


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_encodings_as_pylance(serve: Callable[..., Quiver], tables: Path, version: str) -> None:
    """The same table written by Quiver and by pylance: every column's pages
    use encodings pylance chose for that column (bit-packed integers,
    timestamps and floats, a dictionary (LZ4-compressed in 2.2) for 16
    categories, FSST for 20,000 user names and for random names, flat
    bools), pylance and lancedb read every value back, and the files are
    within 5% of pylance's size."""
    n = 300_000
    rng = np.random.default_rng(11)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789"))
    users = pa.array([f"user-{v:010x}" for v in rng.integers(0, 1 << 40, 20_000)])
    names = ["".join(rng.choice(letters, size=int(k))) for k in rng.integers(8, 25, n)]
    ids = np.arange(n, dtype=np.int64)
    t = pa.table({
        "id": pa.array(ids),
        "ts": pa.array(ids * 1000 + 1_764_700_000_000_000, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        "category": pa.array(CATEGORIES * 2)[0:16].take(pa.array(rng.integers(0, 16, n))),
        "user": users.take(pa.array(rng.integers(0, 20_000, n))),
        "name": pa.array([None if i % 13 == 0 else s for i, s in enumerate(names)], pa.string()),
        "amount": pa.array(rng.random(n) * 1000.0),
        "quantity": pa.array(rng.integers(0, 1000, n).astype(np.int32)),
        "active": pa.array(rng.random(n) < 0.5),
    })
    t = pa.Table.from_batches(t.to_batches(max_chunksize=65_536))
    name = f"encodings-{version}"
    path, ref = tables / f"{name}.lance", tables / f"{name}-pylance.lance"
    q = serve([lance_endpoint("e", path, data_storage_version=version)])
    q.client().put("e", t)
    lance.write_dataset(t, str(ref), data_storage_version=version)
    assert_same(lance.dataset(str(path)).to_table(), t, "pylance")
    assert_same(lancedb.connect(str(tables)).open_table(name).to_arrow(), t, "lancedb")
    ours, theirs = page_encodings(path), page_encodings(ref)
    for col in t.column_names:
        print(f"{version} {col}: Quiver {sorted(ours[col])}, pylance {sorted(theirs[col])}")
        assert ours[col] and ours[col] <= theirs[col], \
            f"{col}: Quiver's pages use {sorted(ours[col] - theirs[col])}, pylance's {sorted(theirs[col])}"
    assert any("Fsst" in e for e in ours["user"]) and any("Fsst" in e for e in ours["name"])
    ratio = dir_bytes(path) / dir_bytes(ref)
    print(f"{name}: Quiver {dir_bytes(path)} bytes, pylance {dir_bytes(ref)} bytes, ratio {ratio:.3f}")
    assert ratio <= 1.05, f"Quiver's data files are {ratio:.3f}x pylance's"


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_dictionary_in_vector_refused(serve: Callable[..., Quiver], tables: Path, version: str) -> None:
    """A fixed-size list of dictionary items (whose dictionary Quiver wrote
    nowhere, leaving a dataset pylance failed to scan) is refused with
    InvalidArgument naming the column; the server goes on serving."""
    items = pa.DictionaryArray.from_arrays(pa.array([0, 1, 1, 0], pa.int8()), pa.array(["x", "y"]))
    t = pa.table({"id": pa.array([0, 1], pa.int64()), "vdict": pa.FixedSizeListArray.from_arrays(items, 2)})
    path, ok_path = tables / f"vdict-{version}.lance", tables / f"vok-{version}.lance"
    q = serve([lance_endpoint("v", path, data_storage_version=version),
               lance_endpoint("ok", ok_path, data_storage_version=version)])
    with pytest.raises((flight.FlightError, pa.ArrowException)) as e:
        q.client().put("v", t)
    assert "invalid" in str(e.value).lower() and "vdict" in str(e.value) and "dictionary" in str(e.value), str(e.value)
    ok = pa.table({"id": pa.array([0, 1], pa.int64()), "vdict": pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float32(), 2))})
    q.client().put("ok", ok)
    assert lance.dataset(str(ok_path)).count_rows() == 2


# Quiver's merge_insert options and pylance's builder calls for them.
MERGE_OPTIONS = {
    "upsert": ({}, lambda b: b.when_matched_update_all().when_not_matched_insert_all()),
    "insert_only": ({"when_matched": "do_nothing"}, lambda b: b.when_not_matched_insert_all()),
    "update_only": ({"when_not_matched": "do_nothing"}, lambda b: b.when_matched_update_all()),
    "sync": ({"when_not_matched_by_source": "delete"},
             lambda b: b.when_matched_update_all().when_not_matched_insert_all().when_not_matched_by_source_delete()),
}


def test_merge_insert_differential(serve: Callable[..., Quiver], tables: Path) -> None:
    """Random rounds of merges with random option combinations into a
    pylance-created 2.2 dataset: after every round Quiver's dataset holds
    the rows pylance's merge_insert gives on its copy."""
    rng = np.random.default_rng(20261203)
    ours, theirs = tables / "diff-q.lance", tables / "diff-p.lance"
    lance.write_dataset(workload(0, 2000, seed=11), str(ours))
    shutil.copytree(ours, theirs)
    q = serve([lance_endpoint(name, ours, mode="merge_insert", on=["id"], **opts)
               for name, (opts, _) in MERGE_OPTIONS.items()])
    next_id = 2000
    for rnd in range(8):
        name = str(rng.choice(list(MERGE_OPTIONS)))
        live = lance.dataset(str(theirs)).to_table(columns=["id"]).column("id").to_numpy()
        n_old, n_new = int(rng.integers(0, 400)), int(rng.integers(1, 300))
        old = rng.choice(live, size=min(n_old, len(live)), replace=False) if name != "sync" else live[: len(live) // 2]
        ids = np.concatenate([old, np.arange(next_id, next_id + n_new)]).astype(np.int64)
        next_id += n_new
        rng.shuffle(ids)
        src = pa.concat_tables([workload(int(i), 1, seed=100 + rnd) for i in ids])
        q.client().put(name, src)
        MERGE_OPTIONS[name][1](lance.dataset(str(theirs)).merge_insert("id")).execute(src)
        assert_same(lance.dataset(str(ours)).to_table(), lance.dataset(str(theirs)).to_table(), f"round {rnd} ({name})")


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_wide_dictionaries_read_and_optimized(serve: Callable[..., Quiver], tables: Path, version: str) -> None:
    """Categorical batches whose dictionaries (int8-indexed, 40 entries
    each, all different) together outgrow the index type: Quiver rolls a
    data file before a batch that would overflow the file's dictionary
    (pylance joins a file's pages and fails past the index type), pylance
    reads every value back, and after Quiver's optimize (12 batches, three
    to a file: 10 fragments become 4) pylance still reads the same values."""
    batches, rows = [], 0
    for put in range(3):
        for k in range(4):
            cats = pa.array([f"p{put}-b{k}-c{i:03d}" for i in range(40)])
            idx = pa.array([None if i % 29 == 0 else (i * 7 + k) % 40 for i in range(250)], pa.int8())
            batches.append(pa.record_batch({"id": pa.array(range(rows, rows + 250), pa.int64()),
                                            "c": pa.DictionaryArray.from_arrays(idx, cats)}))
            rows += 250
    path = tables / f"widedict-{version}.lance"
    q = serve([lance_endpoint("w", path, data_storage_version=version)])
    q.client().put("w", pa.Table.from_batches(batches[:4]))  # 3 batches to a file, then 1
    for b in batches[4:]:
        q.client().put("w", pa.Table.from_batches([b]))
    want = pa.Table.from_batches(batches)

    def check(who: str) -> None:
        def plain(t: pa.Table) -> pa.Table:  # the chunks' dictionaries differ: decode each
            c = pa.chunked_array([ch.dictionary_decode() for ch in t.column("c").chunks], pa.string())
            return pa.table({"id": t.column("id"), "c": c}).sort_by("id")

        got = lance.dataset(str(path)).to_table()
        assert pa.types.is_dictionary(got.schema.field("c").type), who
        assert plain(got).equals(plain(want)), who

    check("after the puts")
    assert len(lance.dataset(str(path)).get_fragments()) == 10
    res = q.client().action("optimize", endpoint="w")
    assert res["files_removed"] == 10 and res["files_added"] == 4, res
    check("after optimize")


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_full_int8_dictionaries_one_file(serve: Callable[..., Quiver], tables: Path, version: str) -> None:
    """int8 indices address 128 dictionary entries: 10 batches sharing one
    dictionary of 128, and two batches of 64 entries each (different), are
    each one data file, which pylance reads back value by value."""
    cats = pa.array([f"c{i:03d}" for i in range(128)])
    shared = [pa.record_batch({"id": pa.array(range(100 * k, 100 * k + 100), pa.int64()),
                               "c": pa.DictionaryArray.from_arrays(pa.array([(i + k) % 128 for i in range(100)], pa.int8()), cats)})
              for k in range(10)]
    halves = [pa.record_batch({"id": pa.array(range(1000 + 64 * k, 1064 + 64 * k), pa.int64()),
                               "c": pa.DictionaryArray.from_arrays(pa.array(range(64), pa.int8()), cats[64 * k:64 * k + 64])})
              for k in range(2)]
    path = tables / f"fullint8-{version}.lance"
    q = serve([lance_endpoint("f", path, data_storage_version=version)])
    q.client().put("f", pa.Table.from_batches(shared))
    assert len(lance.dataset(str(path)).get_fragments()) == 1
    q.client().put("f", pa.Table.from_batches(halves))
    assert len(lance.dataset(str(path)).get_fragments()) == 2
    got = lance.dataset(str(path)).to_table()
    want = pa.Table.from_batches(shared + halves)

    def plain(t: pa.Table) -> list:
        c = pa.chunked_array([ch.dictionary_decode() for ch in t.column("c").chunks], pa.string())
        return sorted(zip(t.column("id").to_pylist(), c.to_pylist()))

    assert plain(got) == plain(want)


def test_dictionary_wider_than_indices_refused(serve: Callable[..., Quiver], tables: Path) -> None:
    """A batch whose dictionary alone has more entries (200) than its int8
    indices address is refused with InvalidArgument naming the column;
    nothing is published and the endpoint takes the next put."""
    cats = pa.array([f"c{i:03d}" for i in range(200)])
    t = pa.table({"id": pa.array([0, 1], pa.int64()),
                  "wide": pa.DictionaryArray.from_arrays(pa.array([0, 127], pa.int8()), cats)})
    path = tables / "dict-too-wide.lance"
    q = serve([lance_endpoint("d", path)])
    with pytest.raises((flight.FlightError, pa.ArrowException)) as e:
        q.client().put("d", t)
    assert "invalid" in str(e.value).lower() and "wide" in str(e.value) and "200" in str(e.value), str(e.value)
    ok = pa.table({"id": pa.array([0, 1], pa.int64()),
                   "wide": pa.DictionaryArray.from_arrays(pa.array([0, 127], pa.int8()), cats[:128])})
    q.client().put("d", ok)
    got = lance.dataset(str(path)).to_table()
    assert got.num_rows == 2 and got.column("wide").combine_chunks().dictionary_decode().to_pylist() == ["c000", "c127"]


@pytest.mark.parametrize("layout", ["packed", "blob-v1", "blob-v2"])
def test_layout_dataset_endpoint_unavailable(serve: Callable[..., Quiver], tables: Path, layout: str) -> None:
    """A dataset pylance wrote with a packed struct (2.2) or blob column
    (blob v1 in 2.1, blob v2 in 2.2): its endpoint answers naming the column
    (and "blob v2"), writes nothing, and the server serves the other
    endpoint."""
    if layout == "packed":
        typ = pa.struct([pa.field("a", pa.int32(), False), pa.field("s", pa.string(), False)])
        field = pa.field("col", typ, metadata={"lance-encoding:packed": "true"})
        col, version = pa.array([{"a": i, "s": f"s{i}"} for i in range(10)], typ), "2.2"
    else:
        field = pa.field("col", pa.large_binary(), metadata={"lance-encoding:blob": "true"})
        col, version = pa.array([b"x" * i for i in range(10)], pa.large_binary()), "2.1" if layout == "blob-v1" else "2.2"
    t = pa.table({"id": pa.array(range(10), pa.int64())}).append_column(field, col)
    path, ok = tables / f"{layout}.lance", tables / f"ok-{layout}.lance"
    lance.write_dataset(t, str(path), data_storage_version=version)
    q = serve([lance_endpoint("l", path), lance_endpoint("ok", ok)])
    with pytest.raises((flight.FlightError, pa.ArrowException)) as e:
        q.client().put("l", t)
    assert '"col"' in str(e.value) and ("blob v2" in str(e.value)) == (layout == "blob-v2"), str(e.value)
    assert lance.dataset(str(path)).version == 1
    q.client().put("ok", workload(0, 10))
    assert lance.dataset(str(ok)).count_rows() == 10
