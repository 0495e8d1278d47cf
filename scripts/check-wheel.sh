#!/usr/bin/env bash
# Build the wheel from the files git knows, install it into a fresh virtual
# environment (not editable, outside the source tree), import every module
# and profile the shared Spark event log with the installed command.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
eventlog=${EVENTLOG:-$root/../shared/eventlogs/local-1532512550423}
work="$root/.build/wheel"
rm -rf "$work" && mkdir -p "$work/src"

cd "$root"
git ls-files -z --cached --others --exclude-standard \
  | xargs -0 -I{} sh -c 'test -e "{}" && printf "%s\0" "{}"' \
  | tar --null -T - -cf - | tar -xf - -C "$work/src"
"$root/.venv/bin/python" -m pip wheel --quiet --no-deps -w "$work/dist" "$work/src"
wheel=$(ls "$work"/dist/sparktrail-*.whl)
echo "wheel-check: built $(basename "$wheel")"

python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --upgrade pip
"$work/venv/bin/python" -m pip install --quiet "$wheel"

# From a folder without the sources, so nothing is imported from the tree.
cd "$work"
"$work/venv/bin/python" - <<'PY'
import importlib
import pkgutil
from importlib import resources

import sparktrail

names = ["sparktrail"]
for info in pkgutil.walk_packages(sparktrail.__path__, prefix="sparktrail."):
    names.append(info.name)
# The stage folders install as subpackages (setup.py); each must be there.
stages = {"tracer", "pag", "summaries", "engines", "dashboard", "cli"}
found = {name.split(".")[1] for name in names if name.count(".") >= 1}
missing = stages - found
assert not missing, f"stages missing from the wheel: {sorted(missing)}"
for name in names:
    if name.endswith(".__main__"):
        continue  # runs the CLI when imported
    module = importlib.import_module(name)
    assert "/src/" not in (module.__file__ or ""), f"{name} from the tree"
java = resources.files("sparktrail.tracer") / "java" / "SparktrailListener.java"
assert java.is_file(), "the listener's Java source is missing from the wheel"
print(f"wheel-check: imported {len(names)} modules")
PY
"$work/venv/bin/sparktrail" profile "$eventlog" --window 1s -o "$work/profile" >/dev/null
test -s "$work/profile/report.html"
echo "wheel-check: sparktrail profile from the wheel wrote $work/profile/report.html"
