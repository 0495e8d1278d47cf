#!/usr/bin/env bash
# mypy cannot follow setuptools' package-dir mapping (tracer/ -> sparktrail.tracer),
# so type-check a tree of links laid out as the installed package.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tree="$root/.build/typecheck"
rm -rf "$tree" && mkdir -p "$tree/sparktrail"
for entry in "$root"/sparktrail/*; do ln -s "$entry" "$tree/sparktrail/"; done
for stage in tracer pag summaries engines dashboard; do ln -s "$root/$stage" "$tree/sparktrail/$stage"; done
cd "$tree" && "$root/.venv/bin/mypy" --config-file "$root/pyproject.toml" -p sparktrail
