"""The split partition's slowdown, read against what the split measured.

For each round of the skewed-join ground truth (``bench.ground_truth
--out OUT``, whose per-round event logs are under ``OUT/.spark/events``):

* **model**: :func:`sparktrail.whatif.contention.split_slowdown` of the base
  run's longest task (the hot partition), read from its event log;
* **same stage**: the same formula with ``r_busy`` read from the hot task's
  own stage only (the variant the model did not take);
* **measured**: the fixed run's halves (its two tasks of the most
  records), their mean duration over half the hot task's.

Usage::

    .venv/bin/python -m bench.split_slowdowns OUT [OUT ...]

prints one row per round and the mean absolute error of each reading.
"""

from __future__ import annotations

import argparse
import statistics
import warnings
from pathlib import Path

import numpy as np
import polars as pl

from sparktrail.tracer import import_eventlog
from sparktrail.whatif.contention import (
    BESIDE_SHARE,
    split_slowdown,
    time_beside_others,
)

#: Into how many pieces the fix split the hot partition.
PIECES = 2


def _tasks(log: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One row per task of ``log`` (stage, launch and Spark's finish: its
    rows' extent, CPU and run time, records, span), and the log's trace."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = import_eventlog(log)
    return (
        trace.filter(pl.col("task_id").is_not_null())
        .group_by("task_id")
        .agg(
            pl.col("stage_id").drop_nulls().first(),
            pl.col("start_ns").min().alias("launch_ns"),
            pl.col("end_ns").max().alias("finish_ns"),
            pl.col("executor_cpu_ns").drop_nulls().first().alias("cpu"),
            pl.col("executor_run_ns").drop_nulls().first().alias("run"),
            pl.col("records").sum(),
        )
        .with_columns((pl.col("finish_ns") - pl.col("launch_ns")).alias("span"))
        .sort("task_id")
    ), trace


def _same_stage(tasks: pl.DataFrame, hot: int) -> float:
    """The model's formula with ``r_busy`` from the hot task's stage only
    (every task of the ground truth's local master is on one executor)."""
    beside = time_beside_others(
        tasks["launch_ns"].to_numpy(), tasks["finish_ns"].to_numpy()
    ) / np.maximum(tasks["span"].to_numpy(), 1)
    tasks = tasks.with_columns(pl.Series("beside", beside))
    me = tasks.filter(pl.col("task_id") == hot).row(0, named=True)
    busy = tasks.filter(
        (pl.col("task_id") != hot)
        & (pl.col("stage_id") == me["stage_id"])
        & (pl.col("beside") >= BESIDE_SHARE)
    )
    r_busy = float(busy["cpu"].sum()) / float(busy["run"].sum())
    r_task = float(me["cpu"]) / float(me["run"])
    return max(1.0, 1.0 + (1.0 - float(me["beside"])) * (r_task / r_busy - 1.0))


def rounds(out: Path) -> list[dict[str, float | str]]:
    """Each round's readings of ``out``'s skewed-join pairs."""
    rows: list[dict[str, float | str]] = []
    events = out / ".spark" / "events"
    for base_dir in sorted(events.glob("skewed_join-base-*")):
        fixed_dir = events / base_dir.name.replace("-base-", "-fixed-")
        (base_log,), (fixed_log,) = base_dir.iterdir(), fixed_dir.iterdir()
        base, base_trace = _tasks(base_log)
        fixed, _ = _tasks(fixed_log)
        hot = base.sort("span", "task_id").row(-1, named=True)
        halves = fixed.sort("records", "task_id").tail(PIECES)["span"]
        rows.append(
            {
                "round": f"{out.name} {base_dir.name.rsplit('-', 1)[1]}",
                "model": split_slowdown(base_trace, hot["task_id"], PIECES),
                "same stage": _same_stage(base, hot["task_id"]),
                "measured": float(halves.mean()) / (hot["span"] / PIECES),  # type: ignore[arg-type]
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outs", nargs="+", type=Path, help="ground-truth --out dirs")
    args = parser.parse_args(argv)
    rows = [r for out in args.outs for r in rounds(out)]
    print("| round | model | same stage | measured |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['round']} | {r['model']:.2f} | {r['same stage']:.2f} "
            f"| {r['measured']:.2f} |"
        )
    for reading in ("model", "same stage"):
        error = statistics.mean(
            abs(float(r[reading]) - float(r["measured"])) for r in rows
        )
        print(f"{reading}: mean absolute error {error:.2f} over {len(rows)} rounds")


if __name__ == "__main__":
    main()
