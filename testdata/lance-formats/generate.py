"""Writes the Lance 2.1 and 2.2 reference datasets Quiver's reader is tested on.

Run from the repository root with `make lance-fixtures` (or
`.venv/bin/python testdata/lance-formats/generate.py [--out DIR]`). For each
data storage version in VERSIONS it writes, with pylance (the reference
writer, pinned in requirements-test.txt), one dataset per table below and,
beside it, `<table>.arrow`: the same rows as an Arrow IPC file, which the Go
tests compare the decoded dataset with value by value. The data is
deterministic (seeded); the datasets are small so that they can be committed.
"""

import argparse
import datetime as dt
import decimal
import os
import shutil
import sys
from importlib.metadata import version

import numpy as np
import pyarrow as pa

PINNED = {"pylance": "14.0.2", "pyarrow": "26.0.1"}
VERSIONS = ["2.1", "2.2"]
HERE = os.path.dirname(os.path.abspath(__file__))


def workload(rows, seed=20261202):
    """The standard workload's columns (bench/workload), seeded in numpy."""
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    base = np.datetime64("2026-01-01T00:00:00", "us")
    cats = ["books", "games", "music", "video", "garden", "tools", "toys", "food",
            "drinks", "sports", "outdoor", "health", "beauty", "office", "pets", "travel"]
    alphabet = np.array(list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"))
    names = ["".join(rng.choice(alphabet, size=int(n))) for n in rng.integers(8, 25, rows)]
    return pa.table({
        "id": pa.array(ids),
        "ts": pa.array(base + ids * 1000, pa.timestamp("us", tz="UTC")),
        "user_id": pa.array(rng.integers(0, 1_000_001, rows, dtype=np.int64)),
        "amount": pa.array(np.round(rng.random(rows) * 1000.0, 2)),
        "score": pa.array(rng.random(rows)),
        "name": pa.array(names, pa.string()),
        "category": pa.array([cats[i] for i in rng.integers(0, 16, rows)], pa.string()),
        "active": pa.array(rng.random(rows) < 0.5),
    })


def nulls_every(values, k, typ):
    return pa.array([None if i % k == 0 else v for i, v in enumerate(values)], typ)


def types(rows, seed=7):
    """Columns of the Arrow types Lance users send, with nulls, lists and
    structs; one column all null, one constant, one of large values."""
    rng = np.random.default_rng(seed)
    ints = rng.integers(-1000, 1000, rows)
    words = ["w%d" % (i % 37) for i in range(rows)]
    cols = {
        "i8": nulls_every([int(v) % 100 for v in ints], 7, pa.int8()),
        "i16": pa.array(ints.astype(np.int16)),
        "i32": nulls_every([int(v) for v in ints], 5, pa.int32()),
        "u8": pa.array(np.abs(ints % 200).astype(np.uint8)),
        "u16": pa.array(np.abs(ints).astype(np.uint16)),
        "u32": pa.array(np.abs(ints).astype(np.uint32) * 1000),
        "u64": pa.array(np.abs(ints).astype(np.uint64) << np.uint64(40)),
        "i64_wide": pa.array(rng.integers(-(2**62), 2**62, rows, dtype=np.int64)),
        "f16": pa.array(rng.random(rows).astype(np.float16)),
        "f32": nulls_every([float(v) for v in rng.random(rows).astype(np.float32)], 3, pa.float32()),
        "f64": pa.array(rng.standard_normal(rows)),
        "b": nulls_every([bool(v % 2) for v in ints], 4, pa.bool_()),
        "s": nulls_every(words, 6, pa.string()),
        "ls": pa.array(["long-" + w * 3 for w in words], pa.large_string()),
        "bin": nulls_every([w.encode() * 2 for w in words], 9, pa.binary()),
        "lbin": pa.array([w.encode() for w in words], pa.large_binary()),
        "d32": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=int(v)) for v in ints], pa.date32()),
        "d64": nulls_every([dt.date(2020, 1, 1) + dt.timedelta(days=int(v)) for v in ints], 8, pa.date64()),
        "ts_ns": pa.array(ints.astype(np.int64) * 1_000_000_007, pa.timestamp("ns")),
        "t32": pa.array((np.abs(ints) * 1000).astype(np.int32), pa.time32("ms")),
        "t64": pa.array(np.abs(ints).astype(np.int64) * 1_000_000, pa.time64("us")),
        "dur": pa.array(ints.astype(np.int64), pa.duration("ms")),
        "dec": nulls_every([decimal.Decimal(int(v)) / 100 for v in ints], 10, pa.decimal128(10, 2)),
        "dict": pa.array(words, pa.string()).dictionary_encode(),
        "null": pa.nulls(rows, pa.int32()),
        "const": pa.array(["same"] * rows, pa.string()),
        "const_null": pa.array([None if i % 9 == 0 else "same" for i in range(rows)], pa.string()),
        "const_tags": pa.array([None if i % 9 == 0 else ["t1", None] for i in range(rows)], pa.list_(pa.string())),
        "big": pa.array([bytes([i % 251]) * (260 + i % 20) for i in range(rows)], pa.binary()),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * 16).astype(np.float32)), 16),
        "vec16": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * 8).astype(np.float16)), 8),
        "list": pa.array([None if i % 11 == 0 else [] if i % 7 == 0 else list(range(i % 5)) for i in range(rows)],
                         pa.list_(pa.int32())),
        "llist": pa.array([["x"] * (i % 3) for i in range(rows)], pa.large_list(pa.string())),
        "st": pa.array([None if i % 13 == 0 else {"a": i, "b": None if i % 3 == 0 else words[i]} for i in range(rows)],
                       pa.struct([("a", pa.int64()), ("b", pa.string())])),
    }
    return pa.table(cols)


def maps(rows):
    """Maps (format 2.2 and later only), the data pylance stores with
    run-length encoding (long runs of values, definition levels of sparse
    lists and maps), floats whose field metadata asks for byte-stream
    split (under zstd and LZ4) and a packed struct."""
    rng = np.random.default_rng(7)
    bss = [pa.field(name, typ, metadata={"lance-encoding:compression": codec, "lance-encoding:bss": "on"})
           for name, typ, codec in [("bss64", pa.float64(), "zstd"), ("bss32", pa.float32(), "lz4")]]
    floats = [pa.array(np.round(rng.random(rows) * 100, 1)), pa.array(rng.random(rows).astype(np.float32))]
    t = pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "m": pa.array([None if i % 7 == 3 else [] if i % 5 == 1 else {"k": i, "z": None if i % 3 == 0 else i + 1}
                       for i in range(rows)], pa.map_(pa.string(), pa.int64())),
        "ms": pa.array([None if i % 4 == 0 else {f"key{j}": f"v{i * j}" for j in range(i % 3)} for i in range(rows)],
                       pa.map_(pa.string(), pa.string())),
        "runs": pa.array(np.repeat(rng.integers(0, 1000, rows // 50 + 1), 50)[:rows].astype(np.int32)),
        "sparse": pa.array([[i] if i % 97 == 0 else None if i % 2 else [] for i in range(rows)], pa.list_(pa.int64())),
        "cat": pa.array([["red", "green", "blue"][i // 200 % 3] for i in range(rows)], pa.string()).dictionary_encode(),
    })
    for f, a in zip(bss, floats):
        t = t.append_column(f, a)
    # A struct of fixed-width fields its metadata asks to pack into one column.
    packed = pa.field("packed", pa.struct([("a", pa.int32()), ("b", pa.float64())]), metadata={"lance-encoding:packed": "true"})
    return t.append_column(packed, pa.array([None if i % 7 == 0 else {"a": i, "b": i / 4} for i in range(rows)], packed.type))


def packed(rows):
    """Structs whose field metadata asks to pack them, with variable-width
    fields (format 2.2's variable packed struct, one full-zip column of
    whole rows): a nullable struct, one of binaries and large strings, and
    a struct nesting one with a string; and a packed struct of fixed-width
    fields inside a plain struct. pylance 14 refuses null fields in
    them ("Per-value compression not yet supported for block type
    Nullable") and nested structs of fixed-width fields only."""
    def field(name, typ, nullable=False):
        return pa.field(name, typ, nullable=nullable, metadata={"lance-encoding:packed": "true"})
    def nn(*fs):
        return pa.struct([pa.field(n, t, nullable=False) for n, t in fs])
    inner = nn(("x", pa.int32()), ("s", pa.string()))
    cols = [
        (field("p", nn(("a", pa.int32()), ("s", pa.string()), ("b", pa.float64())), True),
         [None if i % 7 == 0 else {"a": i, "s": "x" * (i % 9), "b": i / 4} for i in range(rows)]),
        (field("bins", nn(("a", pa.int32()), ("s", pa.binary()), ("t", pa.large_string()))),
         [{"a": -i, "s": b"b" * (i % 3), "t": "t%d" % i * (i % 4)} for i in range(rows)]),
        (field("nested", nn(("a", pa.int16()), ("in", inner))),
         [{"a": i % 300, "in": {"x": i * 2, "s": "q" * (i % 5)}} for i in range(rows)]),
    ]
    # A packed struct of fixed-width fields inside a plain struct: one
    # column of the outer struct's leaves holds the inner struct's rows.
    outer = pa.struct([pa.field("a", pa.int32()), field("in", nn(("x", pa.int32()), ("y", pa.int16())), True),
                       pa.field("z", pa.string())])
    cols.append((pa.field("outer", outer),
                 [None if i % 8 == 0 else {"a": i, "in": None if i % 5 == 0 else {"x": i, "y": i % 7}, "z": "z%d" % i}
                  for i in range(rows)]))
    t = pa.table({"id": pa.array(range(rows), pa.int64())})
    for f, vals in cols:
        t = t.append_column(f, pa.array(vals, f.type))
    return t


def blobs(rows):
    """A large_binary column whose field metadata asks Lance to store it
    out of line (lance-encoding:blob): blob v1 pages in 2.1 (descriptions in
    the page, the bytes elsewhere in the data file), blob v2 in 2.2.
    pylance reads such a column back as descriptions (position, size), so
    the .arrow file beside it holds the rows written."""
    f = pa.field("blob", pa.large_binary(), metadata={"lance-encoding:blob": "true"})
    vals = [None if i % 9 == 0 else b"" if i % 10 == 1 else bytes([i % 251]) * (i % 50 * 20 + 1) for i in range(rows)]
    return pa.table({"id": pa.array(range(rows), pa.int64())}).append_column(f, pa.array(vals, pa.large_binary()))


def widedict(batches):
    """Categorical batches (int8 indices) with dictionaries of their own,
    100 entries each, 600 together: pylance 14 unifies them into one page
    of 32-bit indices under the int8 type and cannot read its own file
    back ("dictionary indices use 32 bits but the declared Int8 key type
    uses 8 bits"), so the .arrow file beside it holds the rows written."""
    out, rows = [], 0
    for k in range(batches):
        cats = pa.array(["b%d-c%03d" % (k, i) for i in range(100)])
        idx = pa.array([None if i % 29 == 0 else (i * 7 + k) % 100 for i in range(250)], pa.int8())
        out.append(pa.record_batch({"id": pa.array(range(rows, rows + 250), pa.int64()),
                                    "c": pa.DictionaryArray.from_arrays(idx, cats)}))
        rows += 250
    return pa.Table.from_batches(out)


def nesteddict(rows):
    """Dictionaries below the top level (pandas categoricals inside a
    struct and a list): struct<x: dictionary<string, int32>, y: int64> and
    list<dictionary<string, int32>>, with nulls at every level."""
    words = ["n%d" % (i % 23) for i in range(rows)]
    dt = pa.dictionary(pa.int32(), pa.string())
    st = pa.struct([pa.field("x", dt), pa.field("y", pa.int64())])
    return pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "s": pa.array([None if i % 11 == 0 else {"x": None if i % 4 == 0 else words[i], "y": i} for i in range(rows)], st),
        "l": pa.array([None if i % 9 == 0 else [None if j == 1 else words[(i + j) % rows] for j in range(i % 4)]
                       for i in range(rows)], pa.list_(dt)),
    })


# name: (rows, the versions that store them)
TABLES = {
    "workload": (lambda: workload(3000), VERSIONS),
    "types": (lambda: types(1200), VERSIONS),
    "maps": (lambda: maps(1000), ["2.2"]),
    "packed": (lambda: packed(500), ["2.2"]),
    "blobs": (lambda: blobs(200), VERSIONS),
    "widedict": (lambda: widedict(6), ["2.2"]),
    "nesteddict": (lambda: nesteddict(600), VERSIONS),
}


def reference(name, tbl, ds):
    """The rows the .arrow file holds: what pylance reads back, except for
    blobs (pylance reads descriptions) and widedict (pylance cannot read
    it; an IPC file holds one dictionary per column, so decoded)."""
    if name == "blobs":
        return tbl
    if name == "widedict":
        try:
            ds.to_table()
            print("pylance now reads widedict: update generate.py and docs/lance.md")
        except Exception as e:  # noqa: BLE001 (the limit this fixture documents)
            print("pylance cannot read widedict: %s" % e)
        c = pa.chunked_array([ch.dictionary_decode() for ch in tbl.column("c").chunks], pa.string())
        return tbl.set_column(1, "c", c)
    return ds.to_table()


def check_versions():
    bad = {p: version(p) for p in PINNED if version(p) != PINNED[p]}
    if bad:
        sys.exit("generate.py needs %s, found %s" % (PINNED, bad))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--tables", nargs="*", default=list(TABLES), help="the tables to (re)write")
    args = ap.parse_args()
    check_versions()
    import lance

    for v in VERSIONS:
        for name, (make, versions) in TABLES.items():
            if v not in versions or name not in args.tables:
                continue
            tbl = make()
            folder = os.path.join(args.out, "v" + v.replace(".", "_"))
            os.makedirs(folder, exist_ok=True)
            uri = os.path.join(folder, name + ".lance")
            shutil.rmtree(uri, ignore_errors=True)
            ds = lance.write_dataset(tbl, uri, data_storage_version=v, mode="create")
            assert ds.data_storage_version == v, ds.data_storage_version
            back = reference(name, tbl, ds)
            # The .arrow file holds what pylance reads back (the reference
            # the Go test compares with), which may differ in type from the
            # input where Lance converts; its rows must all be there.
            assert back.num_rows == tbl.num_rows, (back.num_rows, tbl.num_rows)
            with pa.OSFile(os.path.join(folder, name + ".arrow"), "wb") as f:
                with pa.ipc.new_file(f, back.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
                    w.write_table(back)
            print("%s %s: %d rows, schema %s" % (v, name, back.num_rows, back.schema.types))


if __name__ == "__main__":
    main()
