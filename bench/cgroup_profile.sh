#!/bin/bash
# `sparktrail profile` under a memory cgroup: the memory a profile *needs*.
#
# Peak RSS counts the pages of the memory-mapped trace and temporary files
# that a step touched, which the kernel may take back at any time; a
# cgroup's limit counts them too, but reclaims them (writing a mapped
# file's pages back to the file) before it kills anything. A run that
# completes under LIMIT needs no more than LIMIT; one that needs more is
# killed (exit 137) with an oom_kill in the cgroup's counters.
#
#   bash bench/cgroup_profile.sh LIMIT TRACE WINDOW OUT [PYTHONPATH]
#
# e.g. bash bench/cgroup_profile.sh 1G /tmp/huge/traces/profile-trace-100000000.arrow \
#          198306615ns /tmp/out
# Needs root and a cgroup v1 memory controller (/sys/fs/cgroup/memory, as
# on this machine) or cgroup v2 (/sys/fs/cgroup with memory.max).
# PYTHONPATH, when given, runs another copy of the package (an old
# version, side by side).
set -u
LIMIT=$1 TRACE=$2 WINDOW=$3 OUT=$4 PKG=${5:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NAME=sparktrail-bench-$$
if [ -d /sys/fs/cgroup/memory ]; then
    PARENT=/sys/fs/cgroup/memory$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)
    CG=$PARENT/$NAME
    mkdir "$CG" || exit 2
    echo "$LIMIT" > "$CG/memory.limit_in_bytes"
    PEAK=memory.max_usage_in_bytes
else
    CG=/sys/fs/cgroup$(awk -F: '$1=="0"{print $3}' /proc/self/cgroup)/$NAME
    mkdir "$CG" || exit 2
    echo "$LIMIT" > "$CG/memory.max"
    PEAK=memory.peak
fi
trap 'rmdir "$CG" 2>/dev/null' EXIT
echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg) limit $LIMIT ${PKG:+PYTHONPATH=$PKG }$(basename "$TRACE")"
rm -rf "$OUT"
( cd /tmp && echo $BASHPID > "$CG/cgroup.procs" && PYTHONPATH=$PKG exec /usr/bin/time -f "%e s %M KB" \
    "$ROOT/.venv/bin/python" -m sparktrail profile "$TRACE" -o "$OUT" --window "$WINDOW" ) \
    > "$OUT.log" 2>&1
RC=$?
echo "exit $RC: $(tail -1 "$OUT.log")"
echo "cgroup peak $(( $(cat "$CG/$PEAK") / 1048576 )) MiB; $(grep -h oom_kill "$CG"/memory.oom_control "$CG"/memory.events 2>/dev/null | tr '\n' ' ')"
exit $RC
