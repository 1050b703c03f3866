# Two commands set everything up on a fresh machine (Python 3.11+ and Java 17+ are all it needs):
#   make demo   - create .venv, install kafkalog and its dependencies, run the demo end to end
#   make test   - the same set-up, then the whole test suite (first fetching Apache Kafka's and
#                 Spark's Kafka connector's jars from Maven Central for tests/interop, when mvn exists);
#                 the suite includes the lint, layering and type checks (tests/test_packaging.py,
#                 tests/test_layers.py, tests/test_typing.py), with the tools pinned in pyproject.toml
#   make lint   - those three checks alone: ruff, import-linter's contracts, mypy
PYTHON ?= python3
# Processes the suite runs on (pytest-xdist; 0: in pytest's own process, serially). Two use the
# core a serial run leaves idle while a test waits on a JVM's start, a killed child or a poll;
# whole files go to one worker (--dist loadfile), so a module's fixtures are set up once.
TEST_WORKERS ?= 2
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench check-java interop-jars spark-cds clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "kafkalog needs Python 3.11 or newer, found " + sys.version.split()[0]'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

check-java:
	@ci/check_java.sh

demo: $(STAMP) check-java
	$(PY) examples/demo.py

# Into .interop/ (git-ignored), reused offline once complete; KAFKALOG_KAFKA_VERSION picks the broker.
interop-jars:
	@ci/interop/resolve.sh

# The tests' Spark JVMs map the classes they load from one archive (tests/spark_cds.py, into
# .spark-cds/, git-ignored), built once per java and pyspark; the suite runs without it if it fails.
spark-cds: $(STAMP) check-java
	@$(PY) tests/spark_cds.py || echo "spark-cds: not built, the tests' Spark JVMs load their classes from the jars"

test: $(STAMP) check-java interop-jars spark-cds
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

lint: $(STAMP)
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m mypy

bench: $(STAMP)
	$(PY) bench/record_codec.py
	$(PY) bench/storage.py
	$(PY) bench/spark_read.py
	$(PY) bench/spark_write.py
	$(PY) bench/spark_workers.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .interop .spark-cds .mypy_cache .import_linter_cache
