#!/usr/bin/env bash
# mypy cannot follow setuptools' package-dir mapping (tracer/ -> sparktrail.tracer),
# so type-check a tree of links laid out as the installed package.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tree="$root/.build/typecheck"
rm -rf "$tree" && mkdir -p "$tree/sparktrail"
for entry in "$root"/sparktrail/*; do ln -s "$entry" "$tree/sparktrail/"; done
# The stage folders, as setup.py maps them (every key but sparktrail itself).
stages=$(cd "$root" && python3 -c 'import ast; t = ast.parse(open("setup.py").read())
d = next(n.value for n in t.body if isinstance(n, ast.Assign) and n.targets[0].id == "STAGES")
print(" ".join(k for k in ast.literal_eval(d) if k != "sparktrail"))')
for stage in $stages; do ln -s "$root/$stage" "$tree/sparktrail/$stage"; done
cd "$tree" && "$root/.venv/bin/mypy" --config-file "$root/pyproject.toml" -p sparktrail
