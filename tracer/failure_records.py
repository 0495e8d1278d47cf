"""What failed, with its cause: the context's ``failures`` (DESIGN §5).

:class:`FailureRecords` reads the failure of each ``TaskEnd`` (its ``Task
End Reason``), ``StageCompleted`` (the stage's ``Failure Reason``) and
``JobEnd`` (a ``JobFailed`` result) into
:class:`~sparktrail.pag.context.Failure` records; the hint rule
(:mod:`~sparktrail.summaries.hints.failures`) names the cause from them.
Executors removed keep their ``Removed Reason`` on
:class:`~sparktrail.pag.context.ExecutorLife` (the model's own record).

Assumptions
-----------
* Spark's texts are long (stack traces): a record keeps the gist
  (:func:`short_message`) and the first frame of user code
  (:func:`call_site`); at most
  :data:`~sparktrail.pag.context.MAX_FAILURES_PER_KIND` records of one kind
  are kept, every one is counted.
* A field of the wrong type leaves that field out (a damaged log loses a
  detail, never the record); the record is read after the model took the
  event, so a bad event the model skips adds nothing here either.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from sparktrail.pag.context import MAX_FAILURES_PER_KIND, Failure

from .fields import MS, EventError, id_text, opt_int, str_field, time_field

__all__ = ["FailureRecords", "call_site", "root_cause", "short_message"]

#: Longest message kept (characters).
MESSAGE_CHARS = 300
_TRACEBACK = "Traceback (most recent call last):"
#: A Python traceback's frame line: ``File "<path>", line <n>, in <name>``.
_PY_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
#: Frames of Spark, PySpark, the JVM and Scala: not the user's code.
_LIBRARY_CLASSES = ("org.apache.spark.", "scala.", "java.", "javax.", "sun.", "jdk.")
_LIBRARY_FILES = ("pyspark.zip", "/pyspark/", "py4j")
#: The stage a "Job aborted due to stage failure" message names.
_STAGE = re.compile(r"\bin stage (\d+)\.(\d+)")
#: The old driver name of Spark 1.x logs (as tracer.fields maps it).
_OLD_DRIVER = "<driver>"


def _executor(obj: dict[str, Any], key: str = "Executor ID") -> str | None:
    if obj.get(key) is None:
        return None
    text = id_text(obj, key)
    return "driver" if text == _OLD_DRIVER else text


def short_message(text: str | None, limit: int = MESSAGE_CHARS) -> str | None:
    """The gist of a Spark failure text: its first line, and the exception
    line of a Python traceback in it (which says what was raised), cut at
    ``limit`` characters.

    >>> short_message("java.lang.RuntimeException: bad\\n\\tat a.b(c:1)")
    'java.lang.RuntimeException: bad'
    >>> short_message('Lost task 0.3: PythonException: Traceback (most recent '
    ...     'call last):\\n  File "a.py", line 3, in f\\n    raise E("x")\\n'
    ...     'ValueError: x\\n\\n\\tat org.apache.Foo(F.scala:1)')
    'Lost task 0.3: PythonException: ValueError: x'
    """
    if not text:
        return None
    lines = text.splitlines()
    first = next((line.strip() for line in lines if line.strip()), "")
    if _TRACEBACK in text:
        raised = _python_exception(text)
        head = first.replace(_TRACEBACK, "").rstrip()
        first = f"{head} {raised}".strip() if raised else first
    return first if len(first) <= limit else first[: limit - 1] + "…"


_CAUSED_BY = re.compile(r"^\s*Caused by:\s*(.+)$", re.MULTILINE)


def root_cause(text: str | None, limit: int = MESSAGE_CHARS) -> str | None:
    """The deepest ``Caused by:`` of a Java stack trace in ``text`` (the
    exception the wrappers around it were raised for), cut at ``limit``;
    ``None`` when the text states none.

    >>> root_cause("SparkException: Exception thrown in awaitResult:\\n"
    ...     "\\tat a.b(c:1)\\nCaused by: java.io.IOException: Could not read "
    ...     "footer\\n\\tat d(e:2)\\n"
    ...     "Caused by: java.lang.RuntimeException: x.orc is not a Parquet file")
    'java.lang.RuntimeException: x.orc is not a Parquet file'
    """
    if not text:
        return None
    found = _CAUSED_BY.findall(text)
    if not found:
        return None
    last = str(found[-1]).strip()
    return last if len(last) <= limit else last[: limit - 1] + "…"


def _python_exception(text: str) -> str | None:
    """The ``Type: message`` line that ends a Python traceback in ``text``."""
    tail = text.split(_TRACEBACK)[-1].splitlines()
    found = None
    for line in tail[1:]:
        if line.startswith(("\tat ", "\t...")):
            break  # the JVM's stack trace follows the Python one
        if line.strip() and not line.startswith((" ", "\t")):
            found = line.strip()
    return found


def call_site(reason: dict[str, Any]) -> str | None:
    """The first frame of user code where an exception was raised.

    A Python traceback's last frame outside PySpark (``path:line in f``),
    else the first JVM frame outside Spark, Scala and the JDK
    (``Class.method(File:line)``); ``None`` if all frames are library code.

    >>> call_site({"Description": 'Traceback (most recent call last):\\n'
    ...     '  File "/spark/pyspark.zip/pyspark/worker.py", line 9, in main\\n'
    ...     '  File "/app/job.py", line 45, in parse\\n    x()\\nValueError: x'})
    '/app/job.py:45 in parse'
    >>> call_site({"Stack Trace": [{"Declaring Class": "org.apache.spark.rdd.RDD",
    ...     "Method Name": "iterator", "File Name": "RDD.scala", "Line Number": 3},
    ...     {"Declaring Class": "com.acme.Etl", "Method Name": "parse",
    ...     "File Name": "Etl.scala", "Line Number": 12}]})
    'com.acme.Etl.parse(Etl.scala:12)'
    """
    texts = [reason.get(k) for k in ("Description", "Full Stack Trace")]
    for text in texts:
        if isinstance(text, str) and _TRACEBACK in text:
            frames = [
                m.groups()
                for m in map(_PY_FRAME.match, text.split(_TRACEBACK)[-1].splitlines())
                if m
            ]
            user = [f for f in frames if not any(s in f[0] for s in _LIBRARY_FILES)]
            if user:
                path, line, name = user[-1]
                return f"{path}:{line} in {name}"
    stack = reason.get("Stack Trace")
    for frame in stack if isinstance(stack, list) else ():
        if not isinstance(frame, dict):
            continue
        cls, method = frame.get("Declaring Class"), frame.get("Method Name")
        if not isinstance(cls, str) or cls.startswith(_LIBRARY_CLASSES):
            continue
        where = f"{frame.get('File Name')}:{frame.get('Line Number')}"
        return f"{cls}.{method}({where})"
    return None


def _safe(read: Any, obj: dict[str, Any], key: str) -> Any:
    try:
        return read(obj, key)
    except EventError:
        return None


class FailureRecords:
    """The failures of one application, as :class:`Failure` records.

    >>> records = FailureRecords()
    >>> records.task_end({"Stage ID": 2, "Task End Reason": {
    ...     "Reason": "ExceptionFailure", "Class Name": "java.lang.RuntimeException",
    ...     "Description": "got a 3, failing"}},
    ...     {"Task ID": 19, "Index": 3, "Attempt": 0, "Executor ID": "driver",
    ...     "Launch Time": 10, "Finish Time": 56})
    >>> f = records.failures()[0]
    >>> f.kind, f.stage_id, f.partition, f.exception, f.duration_ns
    ('ExceptionFailure', 2, 3, 'java.lang.RuntimeException', 46000000)
    >>> records.counts
    Counter({'ExceptionFailure': 1})
    """

    def __init__(self, per_kind: int = MAX_FAILURES_PER_KIND) -> None:
        self.per_kind = per_kind
        self.counts: Counter[str] = Counter()
        self._kept: list[Failure] = []
        self._seen: set[tuple[str, int | None, int | None]] = set()

    def failures(self) -> tuple[Failure, ...]:
        """The records kept, in log order."""
        return tuple(self._kept)

    def _add(self, failure: Failure, key: tuple[str, int | None, int | None]) -> None:
        if key in self._seen:
            return  # the same end twice (a log written twice over)
        self._seen.add(key)
        self.counts[failure.kind] += 1
        if self.counts[failure.kind] <= self.per_kind:
            self._kept.append(failure)

    def task_end(self, e: dict[str, Any], info: dict[str, Any]) -> None:
        """A ``TaskEnd`` that did not succeed (``Resubmitted`` included)."""
        reason = e.get("Task End Reason")
        reason = reason if isinstance(reason, dict) else {}
        kind = reason.get("Reason")
        if info.get("Failed") and kind in (None, "Success"):
            kind = "UnknownReason"
        if info.get("Killed") and kind in (None, "Success"):
            kind = "TaskKilled"
        if not isinstance(kind, str) or kind == "Success":
            return
        task_id = _safe(opt_int, info, "Task ID")
        launch = _safe(time_field, info, "Launch Time")
        finish = _safe(time_field, info, "Finish Time")
        index = _safe(opt_int, info, "Index")
        partition = _safe(opt_int, info, "Partition ID")
        manager = reason.get("Block Manager Address")
        text = reason.get("Description") or reason.get("Message")
        text = text or reason.get("Loss Reason") or reason.get("Kill Reason")
        full = reason.get("Full Stack Trace")
        cause = root_cause(full if isinstance(full, str) else None) or root_cause(
            text if isinstance(text, str) else None
        )
        by_app = reason.get("Exit Caused By App")
        failure = Failure(
            kind=kind,
            stage_id=_safe(opt_int, e, "Stage ID"),
            stage_attempt=_safe(opt_int, e, "Stage Attempt ID"),
            task_id=task_id,
            attempt=_safe(opt_int, info, "Attempt"),
            partition=partition if partition is not None and partition >= 0 else index,
            executor_id=_executor(info),
            host=_safe(str_field, info, "Host"),
            message=short_message(text if isinstance(text, str) else None),
            time_ns=finish * MS if finish else None,
            duration_ns=(finish - launch) * MS
            if finish and launch is not None and finish >= launch
            else None,
            exception=_safe(str_field, reason, "Class Name"),
            call_site=call_site(reason) if kind == "ExceptionFailure" else None,
            shuffle_id=_safe(opt_int, reason, "Shuffle ID"),
            source_executor=_executor(manager) if isinstance(manager, dict) else None,
            by_app=by_app if isinstance(by_app, bool) else None,
            root_cause=cause,
        )
        self._add(failure, (kind, task_id, finish))

    def stage_completed(self, e: dict[str, Any]) -> None:
        """A ``StageCompleted`` with a ``Failure Reason``."""
        info = e.get("Stage Info")
        info = info if isinstance(info, dict) else {}
        text = _safe(str_field, info, "Failure Reason")
        if not text:
            return
        stage = _safe(opt_int, info, "Stage ID")
        attempt = _safe(opt_int, info, "Stage Attempt ID")
        done = _safe(time_field, info, "Completion Time")
        failure = Failure(
            kind="StageFailed",
            stage_id=stage,
            stage_attempt=attempt,
            message=short_message(text),
            time_ns=done * MS if done else None,
            root_cause=root_cause(text),
        )
        self._add(failure, ("StageFailed", stage, attempt))

    def job_end(self, e: dict[str, Any]) -> None:
        """A ``JobEnd`` whose result is not ``JobSucceeded`` (its stage:
        the one its message says failed, "... in stage 5.0 failed ...")."""
        result = e.get("Job Result")
        result = result if isinstance(result, dict) else {}
        kind = result.get("Result")
        if not isinstance(kind, str) or kind == "JobSucceeded":
            return
        exception = result.get("Exception")
        exception = exception if isinstance(exception, dict) else {}
        job = _safe(opt_int, e, "Job ID")
        done = _safe(time_field, e, "Completion Time")
        message = _safe(str_field, exception, "Message")
        stage = _STAGE.search(message or "")
        failure = Failure(
            kind="JobFailed",
            stage_id=int(stage.group(1)) if stage else None,
            stage_attempt=int(stage.group(2)) if stage else None,
            job_id=job,
            message=short_message(message),
            time_ns=done * MS if done else None,
            root_cause=root_cause(message),
        )
        self._add(failure, ("JobFailed", job, None))
