#!/usr/bin/env bash
# Copies the real-broker interop suite's jars from Maven Central into .interop/ (git-ignored):
#   .interop/kafka-<KAFKALOG_KAFKA_VERSION>/        the broker, its tools and a log4j2 backend
#   .interop/spark-kafka-<KAFKALOG_SPARK_KAFKA_VERSION>/  Spark's Kafka connector (4 jars)
#   .interop/kafka-tiered-storage-<KAFKALOG_KAFKA_VERSION>/  Kafka's LocalTieredStorage (kafka-storage's
#                                                          test fixtures) for tests/remote's broker interop
# Each folder is complete once it has its .complete stamp; a complete folder is reused without
# Maven (offline). mvn keeps its own cache in ~/.m2, so a second clone resolves quickly.
# Without mvn it says so and exits 0: the suite then skips with the same advice.
set -euo pipefail
cd "$(dirname "$0")/../.."
KAFKA_VERSION=${KAFKALOG_KAFKA_VERSION:-4.4.0}
SPARK_KAFKA_VERSION=${KAFKALOG_SPARK_KAFKA_VERSION:-4.2.0}
PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies

resolve() {  # resolve <pom> <dest> <mvn -D property>...
  local pom=$1 dest=$2
  shift 2
  [ -f "$dest/.complete" ] && return 0
  local tmp="$dest.tmp.$$"
  rm -rf "$tmp"
  echo "kafkalog interop: resolving $dest from Maven Central ($*)" >&2
  mvn -q -B -Dstyle.color=never -f "$pom" "$@" "$PLUGIN" -DincludeScope=runtime -DoutputDirectory="$PWD/$tmp" >&2
  touch "$tmp/.complete"
  rm -rf "$dest"
  mv "$tmp" "$dest"
}

if ! command -v mvn >/dev/null 2>&1; then
  echo "kafkalog interop: 'mvn' not found; the real-broker interop suite (tests/interop) will be skipped." >&2
  echo "  Install Maven 3 (Debian/Ubuntu: apt-get install maven; macOS: brew install maven) to run it." >&2
  exit 0
fi
mkdir -p .interop
resolve ci/interop/kafka/pom.xml ".interop/kafka-$KAFKA_VERSION" "-Dkafka.version=$KAFKA_VERSION"
resolve ci/interop/spark/pom.xml ".interop/spark-kafka-$SPARK_KAFKA_VERSION" "-Dspark.version=$SPARK_KAFKA_VERSION"
# LocalTieredStorage: in kafka-storage's test-fixtures jar from 4.4, its "test" jar before
case "$KAFKA_VERSION" in
  [0-3].*|4.[0-3].*) TIERED_CLASSIFIER=test ;;
  *) TIERED_CLASSIFIER=test-fixtures ;;
esac
resolve ci/interop/tiered-storage/pom.xml ".interop/kafka-tiered-storage-$KAFKA_VERSION" "-Dkafka.version=$KAFKA_VERSION" \
  "-Dtiered.storage.classifier=$TIERED_CLASSIFIER"
