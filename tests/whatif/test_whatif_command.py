"""``sparktrail whatif``: the executor table, one change, errors by name."""

from __future__ import annotations

import pytest

from sparktrail import cli
from tests.paths import SHARED_LOG


def test_with_no_change_it_prints_the_error_and_the_executor_table(capsys):
    assert cli.main(["whatif", str(SHARED_LOG)]) == 0
    out = capsys.readouterr().out
    assert "error +0.00%" in out
    assert len([line for line in out.splitlines() if line.strip().endswith(" s")]) == 10


def test_a_driver_gap_dropped(capsys):
    # the driver gap between the log's two jobs: 1.219 s
    code = cli.main(
        ["whatif", str(SHARED_LOG), "--drop-driver-gap", "1532512562228000000"]
    )
    assert code == 0
    assert "saving 1.22 s" in capsys.readouterr().out


def test_a_split_prints_the_stage(capsys):
    assert cli.main(["whatif", str(SHARED_LOG), "--split", "0:1:2"]) == 0
    assert "stage 0: 268 ms -> " in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--split", "9:0:2"], "stage 9 is not in the trace"),
        (["--split", "0:9:2"], "stage 0 has no partition 9"),
        (["--partitions", "5:3"], "stage 5 is not in the trace"),
        (["--speculate", "1000"], "task 1000 is not in the trace"),
    ],
)
def test_a_change_naming_nothing_is_one_line_and_exit_2(capsys, args, named):
    assert cli.main(["whatif", str(SHARED_LOG), *args]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err


def test_a_malformed_change_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["whatif", str(SHARED_LOG), "--split", "0:1"])
    assert exit_.value.code == cli.EXIT_USAGE
    assert "'0:1' is not STAGE:PART:K" in capsys.readouterr().err


def test_a_split_is_slowed_as_the_traces_cpu_times_say(capsys, tmp_path):
    from sparktrail.pag.trace import write_trace
    from tests.whatif.test_contention import SKEWED, _trace

    path = tmp_path / "skewed.arrow"
    write_trace(_trace(SKEWED), path)
    assert cli.main(["whatif", str(path), "--split", "0:2:2"]) == 0
    out = capsys.readouterr().out
    # 1000 ms alone at 90% CPU, tasks beside another at 60%: 750 ms halves.
    assert "slowdown=1.5" in out
    assert "stage 0: 1.1 s -> 850 ms" in out
