"""The tests' own Spark set-up does what tests/conftest.py and tests/spark_jvm.py say it does:
Python workers import pyspark from this interpreter's site-packages (not from pyspark.zip, which
they would compile at every start), and the shared session's JVM maps the class-data sharing
archive that ``make test`` builds (tests/spark_cds.py)."""

from __future__ import annotations

from pathlib import Path

import pyspark
import pytest
import spark_cds
from pyspark.sql.functions import udf


def test_python_workers_import_pyspark_from_site_packages(spark):
    @udf("string")
    def where(_):
        import pyspark
        return pyspark.__file__

    got = spark.range(1).select(where("id")).first()[0]
    assert got == pyspark.__file__ and ".zip" not in got, got


def test_the_sessions_jvm_maps_the_cds_archive(spark):
    path = spark_cds.archive()
    if path is None:
        pytest.skip("no class-data sharing archive: `make test` builds it (tests/spark_cds.py)")
    jvm = spark.sparkContext._gateway.proc.pid      # spark-submit execs the JVM in its process
    maps = Path(f"/proc/{jvm}/maps")
    if not maps.exists():
        pytest.skip("no /proc: the JVM's mappings cannot be read here")
    assert str(path) in maps.read_text(), f"the JVM {jvm} does not map {path}"
