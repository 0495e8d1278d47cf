#!/usr/bin/env bash
# Old against new, side by side: the CP, online-latency and profile
# benchmarks of an older commit (its own bench scripts, its package first on
# PYTHONPATH) alternate with the checkout's, ROUNDS times, in one run.
#
#   bash bench/versions.sh COMMIT [ROUNDS]
#
# Outputs go to bench/results/versions-COMMIT/{cp,online}-{old,new}-N.md and
# profile.md (profile_engines.py --baseline runs its own alternation).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
commit=${1:?usage: bench/versions.sh COMMIT [ROUNDS]}
rounds=${2:-2}
py="$root/.venv/bin/python"
old=/tmp/sparktrail-old-$commit
pkg=/tmp/sparktrail-oldpkg-$commit
out="$root/bench/results/versions-$commit"
mkdir -p "$out"

if [ ! -d "$old" ]; then git -C "$root" worktree add --detach "$old" "$commit"; fi
rm -rf "$pkg" && mkdir -p "$pkg" && cp -r "$old/sparktrail" "$pkg/"
for d in tracer pag whatif summaries engines dashboard; do
  if [ -d "$old/$d" ]; then ln -s "$old/$d" "$pkg/sparktrail/$d"; fi
done

cp_args=(--only cp --sizes 100000,1000000,10000000 --repeat 3 --nx-max 100000 --ref-max 10000)
online_args=(--rates 1000 10000 --duration 30)
for n in $(seq 1 "$rounds"); do
  echo "round $n/$rounds: CP" >&2
  (cd "$old" && PYTHONPATH="$pkg" "$py" bench/run.py "${cp_args[@]}") >"$out/cp-old-$n.md"
  (cd "$root" && "$py" bench/run.py "${cp_args[@]}") >"$out/cp-new-$n.md"
  echo "round $n/$rounds: online latency" >&2
  (cd "$old" && PYTHONPATH="$pkg" "$py" bench/online_latency.py "${online_args[@]}") >"$out/online-old-$n.md"
  (cd "$root" && "$py" bench/online_latency.py "${online_args[@]}") >"$out/online-new-$n.md"
done
echo "profile (alternating, medians of 3)" >&2
(cd "$root" && "$py" bench/profile_engines.py --sizes 1e6 1e7 --engines polars \
  --repeat 3 --baseline "$pkg") >"$out/profile.md"
echo "results in $out" >&2
