"""Hypothesis strategies for random small traces."""

from __future__ import annotations

import polars as pl
from hypothesis import strategies as st

LOCAL_KINDS = ("processing", "gc", "scheduling", "waiting", "driver")
BUSY = ("processing",) * 4


@st.composite
def traces(draw, *, max_workers: int = 5, max_segments: int = 5, big: bool = False):
    """A random acyclic trace of a few workers with small integer times.

    Each worker runs a timeline of local activities and gaps (durations
    0..4, so equal timestamps are frequent). Events are merged into one
    global order consistent with time and each worker's order; seq values
    come from that order, so every edge runs forward in it and the PAG is a
    DAG. Communication edges join two events in that order (send <= receive,
    often equal). Sometimes one worker's clock is skewed, so some messages
    arrive before they were sent (clock noise). Sometimes all timelines start
    at 0 and end together, so many paths span the trace. With ``big`` the
    times and seqs are scaled to nanosecond magnitudes (so the snapshot
    builder's packed int64 vertex keys overflow into its fallback path).
    """
    n_workers = draw(st.integers(3, max_workers))
    workers = [f"w{i}" for i in range(n_workers)]
    # timelines: list of events (time) and rows between consecutive events
    timelines = []
    local_rows = []  # (worker, event index a, event index b, activity)
    aligned = draw(st.booleans())
    for w in workers:
        t = 0 if aligned else draw(st.integers(0, 3))
        times = [t]
        segments = draw(
            st.lists(
                st.tuples(
                    st.sampled_from((*LOCAL_KINDS, *BUSY, None)),  # None: a gap
                    st.integers(0, 4),
                ),
                min_size=1,
                max_size=max_segments,
            )
        )
        for kind, duration in segments:
            t += duration
            times.append(t)
            if kind is not None:
                local_rows.append((w, len(times) - 2, len(times) - 1, kind))
        timelines.append(times)
    if aligned:
        # every timeline runs to a common end, so paths span whole traces
        end = max(times[-1] for times in timelines) + 1
        for w, times in zip(workers, timelines, strict=True):
            times.append(end)
            local_rows.append((w, len(times) - 2, len(times) - 1, "processing"))
    # merge the timelines into one global order, random among equal times
    pos = [0] * n_workers
    order = []  # (worker index, event index)
    while True:
        live = [i for i in range(n_workers) if pos[i] < len(timelines[i])]
        if not live:
            break
        earliest = min(timelines[i][pos[i]] for i in live)
        choices = [i for i in live if timelines[i][pos[i]] == earliest]
        i = draw(st.sampled_from(choices))
        order.append((i, pos[i]))
        pos[i] += 1
    rank = {event: r for r, event in enumerate(order)}
    compress = draw(st.booleans())
    skew = [0] * n_workers
    if not compress and draw(st.booleans()):
        # clock noise: one worker's clock runs late, so some messages to it
        # arrive before they were sent; the global-rank seq keeps a DAG
        skew[draw(st.integers(0, n_workers - 1))] = -draw(st.integers(1, 2))
        timelines = [
            [t + d for t in times] for times, d in zip(timelines, skew, strict=True)
        ]
    if compress:
        # seq = rank among the events at the same time (not globally unique)
        seq_of = {}
        seen: dict[int, int] = {}
        for i, j in order:
            t = timelines[i][j]
            seq_of[(i, j)] = seen.get(t, 0)
            seen[t] = seen.get(t, 0) + 1
    else:
        seq_of = rank
    scale = 10**9 if big else 1
    seq_scale = 10**9 if big else 1

    rows = []

    def add(src, dst, start, end, activity, s_seq, d_seq):
        rows.append(
            {
                "src_worker": src,
                "dst_worker": dst,
                "start_ns": start * scale,
                "end_ns": end * scale,
                "activity": activity,
                "src_seq": s_seq * seq_scale,
                "dst_seq": d_seq * seq_scale,
            }
        )

    for w, a, b, kind in local_rows:
        i = workers.index(w)
        times = timelines[i]
        add(w, w, times[a], times[b], kind, seq_of[(i, a)], seq_of[(i, b)])
    n_messages = draw(st.integers(0, 3 * n_workers))
    for _ in range(n_messages):
        x = draw(st.integers(0, len(order) - 1))
        i, a = order[x]
        # mostly a receive soon after the send, so messages lie on paths
        horizon = draw(st.sampled_from((0, 0, 1, 2, 100)))
        later = [
            y
            for y in range(x + 1, len(order))
            if order[y][0] != i
            and timelines[order[y][0]][order[y][1]] <= timelines[i][a] + horizon
        ]
        if not later:
            continue
        j, b = order[draw(st.sampled_from(later))]
        activity = draw(st.sampled_from(("control", "data", "control", "waiting")))
        add(
            workers[i],
            workers[j],
            timelines[i][a],
            timelines[j][b],
            activity,
            seq_of[(i, a)],
            seq_of[(j, b)],
        )
    if not rows:
        add(workers[0], workers[0], 0, 1, "processing", 0, 1)
    return pl.DataFrame(
        rows,
        schema={
            "src_worker": pl.String,
            "dst_worker": pl.String,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
            "activity": pl.String,
            "src_seq": pl.Int64,
            "dst_seq": pl.Int64,
        },
    )
