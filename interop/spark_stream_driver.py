"""A Spark Structured Streaming driver for test_spark_streaming.py, run as
its own process so that the test can kill -9 it mid-batch:

    python spark_stream_driver.py CONFIG.json

CONFIG: {"location", "endpoints", "input", "checkpoint", "tmp", "writer"?}.
The query reads the Parquet files of `input` one file per micro-batch
(maxFilesPerTrigger 1) with trigger(availableNow=True), writes each batch
with quiver.spark.foreach_batch_writer, and stops when the files present at
its start are processed. QUIVER_SPARK_TEST_PAUSE / _MARKER (quiver.spark)
make it stop mid-batch for the kill."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from quiver.spark import foreach_batch_writer

SCHEMA = "id LONG, v STRING, n INT, at TIMESTAMP, file INT"


def main() -> None:
    cfg = json.loads(Path(sys.argv[1]).read_text())
    tmp = Path(cfg["tmp"])
    settings = {
        "spark.driver.memory": "512m",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "1",
        "spark.default.parallelism": "1",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.warehouse.dir": str(tmp / "warehouse"),
        "spark.local.dir": str(tmp / "local"),
        "spark.sql.streaming.schemaInference": "false",
    }
    builder = SparkSession.builder.master("local[1]").appName("quiver-stream-driver")
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    stream = (
        spark.readStream.format("parquet").schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .load(cfg["input"])
    )
    query = (
        stream.writeStream
        .foreachBatch(foreach_batch_writer(cfg["location"], cfg["endpoints"], cfg.get("writer")))
        .option("checkpointLocation", cfg["checkpoint"])
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
