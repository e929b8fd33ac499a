"""Reads Parquet files with pyarrow (page checksums verified) and compares
every value with what the Go test wrote, given as JSON lines of canonical
rows (TestPyarrowReadsRandomFiles, pyarrow_test.go): integers, floats as
the bits of their float64 ("NaN" for any NaN), strings, binaries as "b:"
and hex, dates as days, timestamps as microseconds, decimals as exact
text, structs, lists and maps (as [key, value] pairs) as lists.

usage: pyarrow_diff.py FILE.parquet EXPECTED.jsonl [FILE.parquet EXPECTED.jsonl ...]
"""

import json
import math
import struct
import sys

import pyarrow as pa
import pyarrow.parquet as pq


def leaf(v, t):
    if v is None:
        return None
    if pa.types.is_floating(t):
        return "NaN" if math.isnan(v) else struct.unpack("<Q", struct.pack("<d", v))[0]
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "b:" + v.hex()
    if pa.types.is_decimal(t):
        return format(v, "f")
    return v


def canon(arr):
    """The canonical value of every slot of arr."""
    t = arr.type
    valid = arr.is_valid().to_pylist()
    if pa.types.is_struct(t):
        fields = [canon(arr.field(i)) for i in range(t.num_fields)]
        return [[f[i] for f in fields] if ok else None for i, ok in enumerate(valid)]
    if pa.types.is_map(t):
        offs = arr.offsets.to_pylist()
        keys, items = canon(arr.keys), canon(arr.items)
        return [[[keys[j], items[j]] for j in range(offs[i], offs[i + 1])] if ok else None for i, ok in enumerate(valid)]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        offs = arr.offsets.to_pylist()
        vals = canon(arr.values)
        return [vals[offs[i]:offs[i + 1]] if ok else None for i, ok in enumerate(valid)]
    if pa.types.is_timestamp(t):
        arr = arr.cast(pa.int64())
    elif pa.types.is_date32(t):
        arr = arr.cast(pa.int32())
    return [leaf(v, t) for v in arr.to_pylist()]


def main(args):
    failures = 0
    for path, expected in zip(args[0::2], args[1::2]):
        table = pq.read_table(path, page_checksum_verification=True)
        columns = [canon(pa.concat_arrays(c.chunks) if c.num_chunks else pa.array([], c.type)) for c in table.columns]
        got = [[c[i] for c in columns] for i in range(table.num_rows)]
        with open(expected) as f:
            want = [json.loads(line) for line in f]
        if len(got) != len(want):
            print(f"{path}: pyarrow read {len(got)} rows, the writer wrote {len(want)}")
            failures += 1
            continue
        for r, (g, w) in enumerate(zip(got, want)):
            if g != w:
                for c, (gv, wv) in enumerate(zip(g, w)):
                    if gv != wv:
                        print(f"{path}: row {r} column {table.column_names[c]} ({table.schema.field(c).type}): pyarrow read {gv!r}, the writer wrote {wv!r}")
                        break
                failures += 1
                break
    if failures:
        sys.exit(1)
    print(f"pyarrow read {len(args) // 2} files exactly")


if __name__ == "__main__":
    main(sys.argv[1:])
