#!/usr/bin/env bash
# One window's step, old against new, alternating in one run:
# bench/window_step.py on an older commit's package (its worktree, the way
# bench/versions.sh builds it) and on the checkout, ROUNDS times each, then
# the median of every phase.
#
#   bash bench/window_step_versions.sh COMMIT [ROUNDS] [RATE]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
commit=${1:?usage: bench/window_step_versions.sh COMMIT [ROUNDS] [RATE]}
rounds=${2:-3}
rate=${3:-30000}
py="$root/.venv/bin/python"
old=/tmp/sparktrail-old-$commit
pkg=/tmp/sparktrail-oldpkg-$commit
out=$(mktemp -d)
if [ ! -d "$old" ]; then git -C "$root" worktree add --detach "$old" "$commit" >&2; fi
rm -rf "$pkg" && mkdir -p "$pkg" && cp -r "$old/sparktrail" "$pkg/"
for d in tracer pag summaries engines dashboard whatif; do
  if [ -d "$old/$d" ]; then ln -s "$old/$d" "$pkg/sparktrail/$d"; fi
done
for n in $(seq 1 "$rounds"); do
  echo "round $n/$rounds (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  # Run from outside both trees, so that the package comes from PYTHONPATH.
  (cd /tmp && PYTHONPATH="$pkg:$root" "$py" "$root/bench/window_step.py" --rate "$rate" --top 0) >"$out/old-$n.md"
  (cd /tmp && PYTHONPATH="$root" "$py" "$root/bench/window_step.py" --rate "$rate" --top 0) >"$out/new-$n.md"
done
"$py" - "$out" "$rounds" <<'PY'
import re, statistics, sys
from pathlib import Path
out, rounds = Path(sys.argv[1]), int(sys.argv[2])
def table(path):
    text = path.read_text()
    rows = {m[1].strip(): float(m[2]) for m in re.finditer(r"^\| (.+?) \| ([0-9.]+) \|$", text, re.M)}
    rows["whole step, unprofiled"] = float(re.search(r"unprofiled: (\d+) ms", text)[1])
    live = re.search(r"live, a poll per file: (\d+) ms", text)
    rows["whole step, live (a poll per file, after the first window)"] = float(live[1]) if live else float("nan")
    alone = re.search(r"live, the close alone: (\d+) ms", text)
    rows["of it the close alone (CP, summaries, hints)"] = float(alone[1]) if alone else float("nan")
    rows["whole step, profiled"] = float(re.search(r"profiled; (\d+) ms", text)[1])
    return rows
runs = {v: [table(out / f"{v}-{n}.md") for n in range(1, rounds + 1)] for v in ("old", "new")}
print(f"| phase (ms per window, median of {rounds}) | old | new | new / old |")
print("|---|---:|---:|---:|")
for key in runs["new"][0]:
    o = statistics.median(r.get(key, float("nan")) for r in runs["old"])
    n = statistics.median(r[key] for r in runs["new"])
    print(f"| {key} | {o:.1f} | {n:.1f} | {n / o if o else float('nan'):.2f} |")
PY
