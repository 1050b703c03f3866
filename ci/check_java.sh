#!/usr/bin/env bash
# Spark needs Java 17 or newer. Say clearly what to install when it is missing.
set -euo pipefail
if ! command -v java >/dev/null 2>&1; then
  echo "kafkalog: Java 17+ is required for Spark but 'java' was not found on PATH." >&2
  echo "  Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless" >&2
  echo "  macOS:         brew install openjdk@17" >&2
  exit 1
fi
ver=$(java -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')
major=${ver%%.*}
[ "$major" = "1" ] && major=$(echo "$ver" | cut -d. -f2)
if [ -z "$major" ] || [ "$major" -lt 17 ] 2>/dev/null; then
  echo "kafkalog: Java 17+ is required for Spark, found '$ver'." >&2
  echo "  Install OpenJDK 17 (e.g. apt-get install openjdk-17-jre-headless) and put it first on PATH." >&2
  exit 1
fi
