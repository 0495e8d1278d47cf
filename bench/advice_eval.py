"""How good the advice is, on labelled real logs (issue 42 item 6).

For every log of a corpus, the hints ``sparktrail profile`` gives (all
severities; *shown* means above ``info``) are held against two files of
``bench/advice/``:

* ``<corpus>_problems.tsv``: what an engineer names in each log (the
  problem, the hint kinds that name it and the stages they must name), or
  ``-`` for a log with nothing notable (healthy). A problem marked minor is
  welcome but not required;
* ``<corpus>_verdicts.tsv``: verdicts on hints checked against the raw
  events (``right``, ``weak``: the finding is real but the action or the
  evidence is partly wrong, ``wrong``), by log, kind, stage and an optional
  text the hint must hold.

It reports, per split (``tune``: the logs the rules were tuned on;
``holdout``: logs nobody tuned on, ``bench/advice/split.tsv`` by corpus and
folder) and in total:

* precision of the shown hints: right, weak, wrong, and not reviewed yet
  (a hint whose key has no verdict: review it against the raw events and add
  a row); wrong hints shown at high severity;
* recall: the problems (not minor) named by a shown hint, named only at
  info, and missed;
* false alarms: healthy logs with a shown hint;

and the same per rule (hint kind). Usage::

    .venv/bin/python -m bench.advice_eval [--corpus reviewed gathered fresh planted]
        [--split tune|holdout] [--list] [--json OUT.json] [--dump HINTS.json]
        [--jobs 2]

``--list`` prints every shown hint not reviewed yet and every missed
problem (what to look at next); ``--dump`` writes every hint of every log.
A corpus whose folder is missing is skipped with a note. A benchmark: the
test ``tests/advice/test_advice_eval.py`` holds the tuned corpus to its
figures.
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import os
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CORPORA",
    "Problem",
    "Verdict",
    "corpus_logs",
    "evaluate",
    "load_problems",
    "load_verdicts",
    "main",
]

HERE = Path(__file__).resolve().parent
LABELS = HERE / "advice"
EVENTLOGS = HERE.parents[0].parent / "shared" / "eventlogs"
#: Each corpus and the folder that holds its logs.
CORPORA = {
    "reviewed": EVENTLOGS / "reviewed",
    "gathered": EVENTLOGS / "gathered",
    "fresh": EVENTLOGS / "fresh",
    "fresh2": EVENTLOGS / "fresh2",
    "planted": LABELS / "planted",
}
SPLIT_FILE = LABELS / "split.tsv"
VERDICTS = ("right", "weak", "wrong")


@dataclass(frozen=True)
class Problem:
    """What an engineer names in a log; any of its ``ways`` names it (hint
    kinds, at stages: empty, any). ``problem`` is ``-`` for a healthy log."""

    log: str
    problem: str
    ways: tuple[tuple[frozenset[str], frozenset[int]], ...]
    minor: bool
    note: str

    @property
    def healthy(self) -> bool:
        return self.problem == "-"

    def named_by(self, hint: dict[str, Any]) -> bool:
        """Whether ``hint`` (a row of the hints frame) names this problem:
        its kind is one of a way's kinds, and it names one of that way's
        stages (a way without stages: any)."""
        if self.healthy:
            return False
        for kinds, stages in self.ways:
            if hint["kind"] in kinds and (not stages or stages & hint_stages(hint)):
                return True
        return False


def parse_named_by(text: str) -> tuple[tuple[frozenset[str], frozenset[int]], ...]:
    """A ``named_by`` cell as its ways: ``kinds@stages`` groups split by
    ``;``, kinds split by ``|``, stages by ``,``.

    >>> ways = parse_named_by("parallelism|hotspot@1,2; capacity_bound")
    >>> [(sorted(kinds), sorted(stages)) for kinds, stages in ways]
    [(['hotspot', 'parallelism'], [1, 2]), (['capacity_bound'], [])]
    """
    ways = []
    for group in text.split(";"):
        kinds, _, stages = group.strip().partition("@")
        names = frozenset(
            k.strip() for k in kinds.split("|") if k.strip() not in ("", "-")
        )
        if names:
            ways.append(
                (names, frozenset(int(s) for s in stages.split(",") if s.strip()))
            )
    return tuple(ways)


@dataclass(frozen=True)
class Verdict:
    """A reviewer's verdict on the hints of ``kind`` at ``stage`` of a log."""

    log: str
    kind: str
    stage: int | None
    match: str
    verdict: str
    by: str
    note: str

    def fits(self, log: str, hint: dict[str, Any]) -> bool:
        if log != self.log or hint["kind"] != self.kind:
            return False
        if self.stage != hint.get("stage_id"):
            return False
        text = f"{hint.get('action') or ''} {hint.get('evidence') or ''}"
        return not self.match or self.match in text


def hint_stages(hint: dict[str, Any]) -> set[int]:
    """The stages a hint names: its own and those its evidence lists."""
    stages = {hint["stage_id"]} if hint.get("stage_id") is not None else set()
    try:
        evidence = json.loads(hint.get("evidence") or "{}")
    except ValueError:
        evidence = {}
    for key in ("stages", "stage_ids"):
        listed = evidence.get(key) if isinstance(evidence, dict) else None
        if isinstance(listed, list):
            stages.update(s for s in listed if isinstance(s, int))
    return stages


def _rows(path: Path) -> list[dict[str, str]]:
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))


def load_problems(corpus: str) -> dict[str, list[Problem]]:
    """``<corpus>_problems.tsv`` by log (empty without the file)."""
    path = LABELS / f"{corpus}_problems.tsv"
    found: dict[str, list[Problem]] = defaultdict(list)
    if not path.is_file():
        return found
    for row in _rows(path):
        found[row["log"]].append(
            Problem(
                row["log"],
                row["problem"].strip(),
                parse_named_by(row["named_by"]),
                row.get("minor", "0").strip() == "1",
                row.get("note", ""),
            )
        )
    return found


def load_verdicts(corpus: str) -> list[Verdict]:
    """``<corpus>_verdicts.tsv`` (empty without the file)."""
    path = LABELS / f"{corpus}_verdicts.tsv"
    if not path.is_file():
        return []
    out = []
    for row in _rows(path):
        verdict = row["verdict"].strip().lower()
        if verdict not in VERDICTS:
            raise ValueError(f"{path}: verdict {verdict!r} is not one of {VERDICTS}")
        stage = row["stage"].strip()
        out.append(
            Verdict(
                row["log"],
                row["kind"],
                int(stage) if stage else None,
                row.get("match", "").strip(),
                verdict,
                row.get("by", ""),
                row.get("note", ""),
            )
        )
    return out


def load_split() -> list[tuple[str, str, str]]:
    """``(corpus, folder prefix, split)`` rows of ``split.tsv``; a log takes
    the split of its longest matching prefix, ``tune`` by default."""
    if not SPLIT_FILE.is_file():
        return []
    return [(r["corpus"], r["folder"], r["split"]) for r in _rows(SPLIT_FILE)]


def split_of(corpus: str, log: str, split: list[tuple[str, str, str]]) -> str:
    best, found = -1, "tune"
    for name, folder, which in split:
        if name == corpus and log.startswith(folder) and len(folder) > best:
            best, found = len(folder), which
    return found


def corpus_logs(root: Path) -> list[Path]:
    """Every event log under ``root``: a file, a rolling ``eventlog_v2_*``
    directory, a Spark 1.x directory (``EVENT_LOG_*`` inside) or a
    Databricks directory (``eventlog`` with its ``eventlog-*.gz`` parts)."""
    found: list[Path] = []

    def is_log_dir(path: Path) -> bool:
        names = [p.name for p in path.iterdir() if p.is_file()]
        legacy = any(n.startswith("EVENT_LOG_") for n in names)
        databricks = "eventlog" in names and any(
            n.startswith("eventlog-") and n.endswith(".gz") for n in names
        )
        return path.name.startswith("eventlog_v2_") or legacy or databricks

    def walk(folder: Path) -> None:
        for path in sorted(folder.iterdir()):
            name = path.name.lower()
            if name.startswith(".") or name.startswith("readme"):
                continue
            if name.endswith((".md", ".tsv", ".sparklens.json")) and path.is_file():
                continue
            if path.is_dir():
                (found.append if is_log_dir(path) else walk)(path)  # type: ignore[operator]
            elif path.is_file():
                found.append(path)

    if root.is_dir():
        walk(root)
    return found


def profile_hints(path: str) -> tuple[list[dict[str, Any]], str | None, float]:
    """Every hint of one log (its rows), an error if it could not be
    profiled, and the seconds it took."""
    from bench.public_hints import profile_log

    began = time.perf_counter()
    try:
        hints, _ = profile_log(Path(path))
    except Exception as err:  # a log that fails is a row of the report
        return [], f"{type(err).__name__}: {str(err)[:120]}", 0.0
    rows = [] if hints.is_empty() else hints.to_dicts()
    return rows, None, time.perf_counter() - began


@dataclass
class Tally:
    """Counts of one split (or one rule)."""

    logs: int = 0
    failed: int = 0
    healthy: int = 0
    false_alarms: int = 0
    problems: int = 0
    named: int = 0
    named_info: int = 0
    shown: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)
    wrong_high: int = 0

    def add_hint(self, verdict: str | None, severity: str) -> None:
        self.shown += 1
        self.verdicts[verdict or "unreviewed"] += 1
        if verdict == "wrong" and severity == "high":
            self.wrong_high += 1

    def precision(self) -> float | None:
        reviewed = sum(self.verdicts[v] for v in VERDICTS)
        return self.verdicts["right"] / reviewed if reviewed else None

    def recall(self) -> float | None:
        return self.named / self.problems if self.problems else None

    def row(self) -> dict[str, Any]:
        return {
            "logs": self.logs,
            "failed": self.failed,
            "shown": self.shown,
            **{v: self.verdicts[v] for v in (*VERDICTS, "unreviewed")},
            "precision": self.precision(),
            "wrong_high": self.wrong_high,
            "problems": self.problems,
            "named": self.named,
            "named_info_only": self.named_info,
            "missed": self.problems - self.named - self.named_info,
            "recall": self.recall(),
            "healthy": self.healthy,
            "false_alarms": self.false_alarms,
        }


def _verdict(verdicts: list[Verdict], log: str, hint: dict[str, Any]) -> Verdict | None:
    # Later rows first: a later review of a reworded hint supersedes an
    # earlier one whose text the hint still holds.
    fitting = [v for v in reversed(verdicts) if v.fits(log, hint)]
    # A row that names a text is more specific than one that does not.
    fitting.sort(key=lambda v: not v.match)
    return fitting[0] if fitting else None


@dataclass
class Report:
    """What :func:`evaluate` found."""

    splits: dict[str, Tally]
    rules: dict[str, Tally]
    unreviewed: list[dict[str, Any]]
    missed: list[dict[str, Any]]
    alarms: list[dict[str, Any]]
    failures: list[dict[str, Any]]
    hints: dict[str, list[dict[str, Any]]]


def evaluate(
    corpora: Iterable[str],
    jobs: int = 2,
    roots: dict[str, Path] | None = None,
    only: str | None = None,
) -> Report:
    """Profile every log of ``corpora`` (of split ``only``, when given) and
    hold its hints to the labels."""
    roots = roots or CORPORA
    split = load_split()
    work: list[tuple[str, str, Path]] = []
    for corpus in corpora:
        root = roots[corpus]
        if not root.is_dir():
            print(f"note: no corpus {corpus!r} at {root}: skipped", file=sys.stderr)
            continue
        work += [
            (corpus, str(p.relative_to(root)), p)
            for p in corpus_logs(root)
            if only is None or split_of(corpus, str(p.relative_to(root)), split) == only
        ]
    paths = [str(p) for _, _, p in work]
    if jobs <= 1:
        results = [profile_hints(p) for p in paths]
    else:
        # Spawned, not forked: a fork of a process with polars' threads
        # running can hang.
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=spawn) as pool:
            results = list(pool.map(profile_hints, paths))
    splits: dict[str, Tally] = defaultdict(Tally)
    rules: dict[str, Tally] = defaultdict(Tally)
    report = Report(splits, rules, [], [], [], [], {})
    labels = {c: (load_problems(c), load_verdicts(c)) for c in {c for c, _, _ in work}}
    for (corpus, log, _), (hints, error, _took) in zip(work, results, strict=True):
        problems, verdicts = labels[corpus]
        where = split_of(corpus, log, split)
        for tally in (splits[where], splits["all"]):
            tally.logs += 1
        report.hints[f"{corpus}/{log}"] = hints
        if error is not None:
            for tally in (splits[where], splits["all"]):
                tally.failed += 1
            report.failures.append({"log": f"{corpus}/{log}", "error": error})
            continue
        shown = [h for h in hints if h["severity"] != "info"]
        for hint in shown:
            verdict = _verdict(verdicts, log, hint)
            name = verdict.verdict if verdict else None
            for tally in (splits[where], splits["all"], rules[hint["kind"]]):
                tally.add_hint(name, hint["severity"])
            if verdict is None:
                report.unreviewed.append(_brief(corpus, log, hint))
        own = problems.get(log, [])
        if any(p.healthy for p in own):
            for tally in (splits[where], splits["all"]):
                tally.healthy += 1
                tally.false_alarms += bool(shown)
            if shown:
                report.alarms.extend(_brief(corpus, log, h) for h in shown)
        for problem in own:
            if problem.healthy or problem.minor:
                continue
            by_shown = [h for h in shown if problem.named_by(h)]
            by_info = [h for h in hints if problem.named_by(h)]
            for tally in (splits[where], splits["all"]):
                tally.problems += 1
                tally.named += bool(by_shown)
                tally.named_info += bool(by_info) and not by_shown
            for hint in by_shown[:1]:
                rules[hint["kind"]].named += 1
            if not by_shown:
                report.missed.append(
                    {
                        "log": f"{corpus}/{log}",
                        "problem": problem.problem,
                        "note": problem.note,
                        "at_info": [h["kind"] for h in by_info],
                    }
                )
    return report


def _brief(corpus: str, log: str, hint: dict[str, Any]) -> dict[str, Any]:
    saving = hint.get("predicted_saving_ns")
    return {
        "log": f"{corpus}/{log}",
        "kind": hint["kind"],
        "stage": hint.get("stage_id"),
        "severity": hint["severity"],
        "saving_s": None if saving is None else round(saving / 1e9, 2),
        "share": hint.get("saving_share"),
        "action": hint.get("action"),
    }


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def table(report: Report) -> str:
    """The splits and the rules as markdown tables."""
    head = (
        "| | logs | shown | right | weak | wrong | unreviewed | precision "
        "| wrong high | problems | named | info only | missed | recall "
        "| healthy | false alarms |\n|" + "---|" * 16
    )
    lines = [head]
    for name in ("tune", "holdout", "all"):
        if name not in report.splits:
            continue
        r = report.splits[name].row()
        lines.append(
            f"| {name} | {r['logs']} | {r['shown']} | {r['right']} | {r['weak']} "
            f"| {r['wrong']} | {r['unreviewed']} | {_pct(r['precision'])} "
            f"| {r['wrong_high']} | {r['problems']} | {r['named']} "
            f"| {r['named_info_only']} | {r['missed']} | {_pct(r['recall'])} "
            f"| {r['healthy']} | {r['false_alarms']} |"
        )
    lines += [
        "",
        "| rule | shown | right | weak | wrong | unreviewed | problems named |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind in sorted(report.rules, key=lambda k: -report.rules[k].shown):
        r = report.rules[kind].row()
        lines.append(
            f"| {kind} | {r['shown']} | {r['right']} | {r['weak']} | {r['wrong']} "
            f"| {r['unreviewed']} | {report.rules[kind].named} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", nargs="+", default=list(CORPORA))
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument(
        "--split",
        choices=("tune", "holdout"),
        help="only the logs of this split (tuning looks at tune alone)",
    )
    parser.add_argument("--list", action="store_true", help="list what to review")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--dump", type=Path, help="write every hint here")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    report = evaluate(args.corpus, args.jobs, only=args.split)
    print(table(report))
    print(f"\n({time.perf_counter() - began:.0f} s)")
    for failure in report.failures:
        print(f"FAILED {failure['log']}: {failure['error']}")
    if args.list:
        for title, rows in (
            ("shown, not reviewed", report.unreviewed),
            ("false alarms (healthy logs)", report.alarms),
            ("missed problems", report.missed),
        ):
            print(f"\n## {title}: {len(rows)}")
            for row in rows:
                print(json.dumps(row, default=str))
    if args.json is not None:
        figures = {
            "splits": {k: v.row() for k, v in report.splits.items()},
            "rules": {k: v.row() for k, v in report.rules.items()},
            "missed": report.missed,
            "unreviewed": report.unreviewed,
            "false_alarms": report.alarms,
        }
        args.json.write_text(json.dumps(figures, indent=1, default=str))
    if args.dump is not None:
        args.dump.write_text(json.dumps(report.hints, indent=1, default=str))
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
