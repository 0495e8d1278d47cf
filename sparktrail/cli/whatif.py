"""``sparktrail whatif INPUT [CHANGE]``: the predicted wall time after one change.

INPUT is a trace or a Spark event log (as for ``profile``). With no change
the command prints the unchanged replay's error and the executor table
(10% to 500% of today's executors); with one change it prints the run's and
the stage's wall time before and after (DESIGN §9).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparktrail.errors import InputError
from sparktrail.sources import open_trace
from sparktrail.units import duration, percent

if TYPE_CHECKING:
    from sparktrail.whatif import Change, Prediction, SplitPartition, StagePartitions


__all__ = ["change_of", "parse_ints", "register", "run"]


def parse_ints(text: str, count: int, form: str) -> list[int]:
    """``count`` integers separated by ``:`` (``form`` names them in errors).

    >>> parse_ints("3:7:2", 3, "STAGE:PART:K")
    [3, 7, 2]
    >>> parse_ints("3:x", 2, "STAGE:N")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: '3:x' is not STAGE:N (integers)
    """
    parts = text.split(":")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != count:
        raise argparse.ArgumentTypeError(f"{text!r} is not {form} (integers)")
    return values


def _split(text: str) -> SplitPartition:
    from sparktrail.whatif import SplitPartition

    stage, part, k = parse_ints(text, 3, "STAGE:PART:K")
    try:
        return SplitPartition(stage, part, k)
    except InputError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def _partitions(text: str) -> StagePartitions:
    from sparktrail.whatif import StagePartitions

    stage, n = parse_ints(text, 2, "STAGE:N")
    try:
        return StagePartitions(stage, n)
    except InputError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def register(subparsers: Any) -> None:
    """Add the ``whatif`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "whatif",
        help="predict the wall time after one change (what-if replay)",
        description=(
            "Replay the traced tasks on the traced slots and driver gaps and "
            "predict the run's wall time after one change. With no change, "
            "print the replay's error and the run over executor counts."
        ),
    )
    parser.add_argument(
        "input", type=Path, help="trace (*.arrow file or directory) or event log"
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--split",
        type=_split,
        metavar="STAGE:PART:K",
        help=(
            "split partition PART of stage STAGE into K pieces (slowed as "
            "Spark's CPU times show the pieces would run beside each other)"
        ),
    )
    group.add_argument(
        "--speculate",
        type=int,
        metavar="TASK",
        help="a speculative copy of task TASK at its stage's median duration",
    )
    group.add_argument(
        "--executors", type=int, metavar="N", help="run with N executors"
    )
    group.add_argument(
        "--partitions",
        type=_partitions,
        metavar="STAGE:N",
        help="run stage STAGE as N equal tasks",
    )
    group.add_argument(
        "--drop-driver-gap",
        type=int,
        metavar="START_NS",
        help="remove the driver interval that starts at START_NS",
    )
    parser.set_defaults(run=run)


def change_of(args: argparse.Namespace) -> Change | None:
    """The change the parsed ``whatif`` options name (``None``: none)."""
    from sparktrail.whatif import DropDriverGap, Executors, SpeculateTask

    if args.split is not None:
        return args.split  # type: ignore[no-any-return]
    if args.speculate is not None:
        return SpeculateTask(args.speculate)
    if args.executors is not None:
        return Executors(args.executors)
    if args.partitions is not None:
        return args.partitions  # type: ignore[no-any-return]
    if args.drop_driver_gap is not None:
        return DropDriverGap(args.drop_driver_gap)
    return None


def _print_prediction(change: Change, p: Prediction) -> None:
    traced, replayed = duration(p.traced_wall_ns), duration(p.replayed_wall_ns)
    share = p.saving_ns / p.replayed_wall_ns if p.replayed_wall_ns else 0.0
    print(f"change: {change}")
    print(f"traced wall {traced}, replayed {replayed}")
    way = "saving" if p.saving_ns >= 0 else "adding"
    print(
        f"predicted wall {duration(p.predicted_wall_ns)}, {way} "
        f"{duration(abs(p.saving_ns))} of the run's wall time ({percent(abs(share))})"
    )
    if p.stage_id is not None:
        before, after = duration(p.stage_before_ns), duration(p.stage_after_ns)
        print(f"stage {p.stage_id}: {before} -> {after}")


def run(args: argparse.Namespace) -> int:
    """Run ``sparktrail whatif``; returns the exit code."""
    from sparktrail.whatif import Replay, SplitPartition, executor_table, predict
    from sparktrail.whatif.contention import measured_split

    # Make the change first: a bad value fails before the input is read.
    change = change_of(args)
    trace, _ = open_trace(args.input)
    replay = Replay.of(trace)
    if isinstance(change, SplitPartition):
        change = measured_split(trace, change)
    if change is not None:
        _print_prediction(change, predict(replay, change))
        return 0
    wall = replay.run().wall_ns
    traced = replay.traced_wall_ns
    error = wall / traced - 1 if traced else 0.0
    print(
        f"traced wall {duration(traced)}, replayed {duration(wall)} "
        f"(error {error:+.2%}); "
        f"{replay.tasks.height} tasks on {replay.slots} slots of "
        f"{replay.executors} executors"
    )
    table = executor_table(replay)
    print(f"{'executors':>9} {'slots':>6} {'factor':>7} {'wall':>12} {'saving':>12}")
    for factor, count, slots, wall_ns, saving in table.iter_rows():
        wall_text, saving_text = duration(wall_ns), duration(saving)
        print(f"{count:9d} {slots:6d} {factor:6.0%} {wall_text:>12} {saving_text:>12}")
    return 0
