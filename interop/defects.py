"""Known Quiver defects the interop suite exposes, as strict xfail marks:
a test marked with one fails as long as the defect is there, and turns into
a failure (XPASS, strict) once the fix lands, so that the mark is removed
with the fix."""

import pytest


def defect(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason="known defect: " + reason)


DELTA_LENGTH_BYTE_ARRAY_SPARK = defect(
    "writers/parquetio encodes string pages as DELTA_LENGTH_BYTE_ARRAY in a way Spark's vectorized "
    "Parquet reader decodes wrongly when a page holds nulls before values and more than 4096 rows "
    "(Spark returns garbled or shifted strings)")

NTZ_FEATURE_ON_ADD_COLUMNS = defect(
    "a timestamp_ntz column added by schema_evolution add_columns does not add the timestampNtz "
    "table feature (protocol 3/7) to the table, so readers refuse the table")

FLOAT_PARTITION_SPELLING = defect(
    "float and double partition values are spelled the Go way (strconv: +Inf, -Inf, 1e+20) in "
    "partitionValues; Spark parses them with Java's Double.parseDouble, which refuses +Inf")

REMOVE_WITHOUT_PARTITION_VALUES = defect(
    "the remove actions of overwrite (and upsert) commits carry no partitionValues")

OLDER_CLIENTS_AFTER_ADD_COLUMNS = defect(
    "after a stream added a column under add_columns, a stream with the older schema (without the "
    "new nullable column) is refused with InvalidArgument instead of reading it as null")

STATS_IGNORE_NUM_INDEXED_COLS = defect(
    "Quiver writes statistics for every column, ignoring the table's delta.dataSkippingNumIndexedCols "
    "(default 32): Delta writers collect statistics for the first N columns only")
