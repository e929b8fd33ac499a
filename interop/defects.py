"""Known Quiver defects the interop suite exposes, as strict xfail marks:
a test marked with one fails as long as the defect is there, and turns into
a failure (XPASS, strict) once the fix lands, so that the mark is removed
with the fix."""

import pytest


def defect(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason="known defect: " + reason)


DELTA_LENGTH_BYTE_ARRAY = defect(
    "writers/parquetio leaves parquet-go's default encoding for strings and binary that outgrow their "
    "dictionary: DELTA_LENGTH_BYTE_ARRAY, which Spark's vectorized reader refuses (<= 3.3) or misreads "
    "when nulls precede values or a page spans several 4096-row batches (SPARK-52240)")

NTZ_FEATURE_ON_ADD_COLUMNS = defect(
    "a timestamp_ntz column added by schema_evolution add_columns does not add the timestampNtz "
    "table feature (protocol 3/7) to the table, so readers refuse the table")

FLOAT_PARTITION_SPELLING = defect(
    "float and double partition values are spelled the Go way (strconv: +Inf, -Inf) in "
    "partitionValues; Java readers parse them with Double.parseDouble, which refuses +Inf "
    "(Spark 4.2's cast happens to accept it)")

REMOVE_WITHOUT_PARTITION_VALUES = defect(
    "removes of an unpartitioned table carry no partitionValues (omitted when empty) in commits and "
    "checkpoints, although removes with extendedFileMetadata must state them ({})")

OLDER_CLIENTS_AFTER_ADD_COLUMNS = defect(
    "after a stream added a column under add_columns, an upsert stream with the older schema "
    "(without the new nullable column) is refused instead of keeping the column's values of "
    "updated rows and inserting nulls, as Delta's MERGE with schema evolution does")

STATS_IGNORE_NUM_INDEXED_COLS = defect(
    "Quiver writes statistics for every column, ignoring the table's delta.dataSkippingNumIndexedCols "
    "(default 32): Delta writers collect statistics for the first N columns only")
