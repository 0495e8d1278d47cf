"""The window picker: its options, and the window a click on a chart picks.

The picker lists the newest :data:`PICKER_WINDOWS` windows and finds older
ones by the text typed into it; a click on a bar of the over-time chart or
on a micro-batch picks the window it names. Each is a pure function of the
snapshot: a value from the page only selects among the snapshot's windows.
"""

from __future__ import annotations

from .live_view import LATEST, ViewState, window_start
from .whole_run import WHOLE_RUN

__all__ = ["PICKER_WINDOWS", "clicked_batch", "clicked_window", "picker_options"]

#: Windows the picker lists without a search (the newest).
PICKER_WINDOWS = 200


_SEARCH_CHARS = 64


_WHOLE_RUN_LABEL = "whole run (all closed windows)"


def picker_options(
    snapshot: ViewState, search: object = None, picked: object = None
) -> list[dict[str, str]]:
    """The window picker's options: follow-latest, then windows newest first.

    Parameters
    ----------
    snapshot
        Its windows are the choice.
    search
        Text typed into the picker: windows whose label holds it (at most
        :data:`PICKER_WINDOWS`); without it, the newest windows.
    picked
        The picker's value; its window stays listed, so it stays shown.

    Examples
    --------
    >>> [o["value"] for o in picker_options(ViewState(source="t", status="s"))]
    ['latest', 'whole-run']
    """
    if not snapshot.live:
        return [{"label": "whole run", "value": LATEST}]
    options = [{"label": "latest window (follow)", "value": LATEST}]
    newest = reversed(snapshot.windows)
    text = search.strip()[:_SEARCH_CHARS] if isinstance(search, str) else ""
    if text in _WHOLE_RUN_LABEL:  # a search filters this choice too
        options.append({"label": _WHOLE_RUN_LABEL, "value": WHOLE_RUN})
    views = [v for v in newest if text in v.label] if text else list(newest)
    views = views[:PICKER_WINDOWS]
    kept = snapshot.window(picked)
    if kept is not None and kept.key == picked and kept not in views:
        views.append(kept)
    options += [{"label": view.label, "value": view.key} for view in views]
    return options


def _clicked_data(click: object) -> object:
    """The ``customdata`` of the first point of a Dash ``clickData``."""
    points = click.get("points") if isinstance(click, dict) else None
    if not isinstance(points, list) or not points or not isinstance(points[0], dict):
        return None
    return points[0].get("customdata")


def clicked_window(snapshot: ViewState, click: object) -> str | None:
    """The picker value of the window a click on the over-time chart hit.

    Each bar carries its window's start in ns (``customdata[1]``, see
    :func:`~sparktrail.dashboard.figures.activity_over_time`); a bar of
    merged windows picks the first of them. Anything else gives ``None``.

    >>> clicked_window(ViewState(source="t", status="s"), {"points": []}) is None
    True
    """
    data = _clicked_data(click)
    start = window_start(data[1]) if isinstance(data, list) and len(data) > 1 else None
    view = snapshot.window(str(start)) if start is not None else None
    if view is None or view.start_ns != start:
        return None
    return view.key if snapshot.live else LATEST


def clicked_batch(snapshot: ViewState, click: object) -> str | None:
    """The picker value of the window a click on a micro-batch selects: the
    closed window its trigger started in (``customdata[1]``, in ms, see
    :mod:`~sparktrail.dashboard.stream_figures`); ``None`` when there is
    none (yet).

    >>> clicked_batch(ViewState(source="t", status="s"), {"points": []}) is None
    True
    """
    data = _clicked_data(click)
    ms = data[1] if isinstance(data, list) and len(data) > 1 else None
    if not isinstance(ms, int | float) or isinstance(ms, bool) or ms != ms:
        return None
    at = int(ms) * 1_000_000
    for view in reversed(snapshot.windows):  # recent batches are clicked most
        if view.start_ns <= at < view.end_ns and view.key != WHOLE_RUN:
            return view.key if snapshot.live else LATEST
    return None
