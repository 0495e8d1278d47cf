#!/usr/bin/env bash
# Spark (pyspark) needs a Java 17+ runtime; the tracer's listener needs javac.
set -euo pipefail
if ! command -v java >/dev/null 2>&1; then
  echo "sparktrail: Java not found. Spark needs Java 17 or newer." >&2
  echo "  Debian/Ubuntu: sudo apt-get install -y openjdk-17-jdk-headless" >&2
  echo "  or set JAVA_HOME to a JDK 17+ and put \$JAVA_HOME/bin on PATH." >&2
  exit 1
fi
version=$(java -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')
major=${version%%.*}
if [ "$major" = "1" ]; then major=$(echo "$version" | cut -d. -f2); fi
if [ "${major:-0}" -lt 17 ]; then
  echo "sparktrail: Java $version found; Spark needs Java 17 or newer." >&2
  echo "  Debian/Ubuntu: sudo apt-get install -y openjdk-17-jdk-headless" >&2
  exit 1
fi
echo "java $version: ok"
