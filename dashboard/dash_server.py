"""The Dash server: its routes, the request guard, and serving.

Safety
------
No path from a request reaches the file system: the server answers only
the page itself and Dash's routes (layout, dependencies, callbacks, the
component scripts registered by its packages) and ``/metrics`` (the
snapshot's numbers for Prometheus, :mod:`~sparktrail.dashboard.metrics`),
anything else with 404; no assets folder, no Flask static folder. A
callback request must name a callback of the page with its declared inputs
(else 400: :func:`well_formed`). :func:`serve` binds 127.0.0.1 unless told
otherwise, with Dash's dev tools off whatever the ``DASH_*`` environment
says.
"""

from __future__ import annotations

import inspect
import logging
from pathlib import Path
from typing import Any

import dash
import flask
from dash.exceptions import DependencyException

from sparktrail.errors import InputError

from .metrics import METRICS_PATH

__all__ = ["MAX_REQUEST_BYTES", "dash_app", "guard", "serve", "well_formed"]

#: Longest request body the server reads (callback requests are small).
MAX_REQUEST_BYTES = 1 << 20


_NO_ASSETS = Path(__file__).parent / "_no_assets"  # never created


#: The routes the page uses, under Dash's routes prefix; any other is 404.
_ROUTES = (
    "",
    "_dash-layout",
    "_dash-dependencies",
    "_dash-update-component",
    "_dash-component-suites/<string:package_name>/<path:fingerprinted_path>",
    "_favicon.ico",
    METRICS_PATH,  # Prometheus' scrapes (dashboard/metrics.py)
)


def _declared(output: str) -> list[tuple[str, str]]:
    """``(id, property)`` of each output of a ``callback_map`` key."""
    names = output.strip(".").split("...") if output.startswith("..") else [output]
    return [(id_, prop) for id_, _, prop in (n.rpartition(".") for n in names)]


def _ids(items: Any) -> list[tuple[Any, Any]] | None:
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        return None
    return [(i.get("id"), i.get("property")) for i in items]


def well_formed(app: dash.Dash, body: Any) -> bool:
    """Whether ``body`` asks for a callback of ``app`` with its declared props.

    Dash runs what a callback request names; this checks the names (the
    values are the callbacks' business): the output is a callback's, and
    the outputs, inputs, state and changed props are the ones it declared.
    """
    if not isinstance(body, dict) or not isinstance(body.get("output"), str):
        return False
    spec = app.callback_map.get(body["output"])
    if spec is None:
        return False
    outputs = body.get("outputs")
    inputs = [(d["id"], d["property"]) for d in spec["inputs"]]
    state = [(d["id"], d["property"]) for d in spec["state"]]
    changed = body.get("changedPropIds", [])
    return (
        _ids(outputs if isinstance(outputs, list) else [outputs])
        == _declared(body["output"])
        and _ids(body.get("inputs")) == inputs
        and _ids(body.get("state", [])) == state
        and isinstance(changed, list)
        and all(c in {f"{i}.{p}" for i, p in inputs} for c in changed)
    )


#: Dash options that newer versions have and that must stay off here
#: (``DASH_MCP_ENABLED`` would add a route that describes the callbacks).
_OFF: dict[str, Any] = {
    name: False
    for name in ("enable_mcp",)
    if name in inspect.signature(dash.Dash).parameters
}


def guard(app: dash.Dash) -> None:
    """Answer only the page's routes and well-formed callback requests."""
    server: flask.Flask = app.server
    server.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES
    prefix = app.config.routes_pathname_prefix
    allowed = {prefix + route for route in _ROUTES}

    @server.before_request
    def only_the_page() -> None:
        rule = flask.request.url_rule
        if rule is None or rule.rule not in allowed:
            flask.abort(404)

    @server.errorhandler(DependencyException)
    def not_a_component_script(_: Exception) -> tuple[str, int]:
        return "not found", 404

    endpoint = prefix + "_dash-update-component"
    dispatch = server.view_functions[endpoint]

    def checked_dispatch(*args: Any, **kwargs: Any) -> Any:
        if not well_formed(app, flask.request.get_json(silent=True)):
            flask.abort(400)
        return dispatch(*args, **kwargs)

    server.view_functions[endpoint] = checked_dispatch


def dash_app(title: str) -> dash.Dash:
    """A Dash app on its own Flask server: no assets, no static folder."""
    server = flask.Flask(__name__, static_folder=None)
    return dash.Dash(
        __name__,
        server=server,  # type: ignore[arg-type]
        title=title,
        assets_folder=str(_NO_ASSETS),
        include_assets_files=False,
        serve_locally=True,
        compress=False,
        suppress_callback_exceptions=False,
        update_title=None,  # type: ignore[arg-type]
        **_OFF,
    )


def serve(
    app: dash.Dash,
    host: str = "127.0.0.1",
    port: int = 8050,
    *,
    verbose: bool = False,
) -> None:
    """Serve ``app`` on ``host:port`` with Flask's threaded server until stopped.

    The host is 127.0.0.1 unless told otherwise. Dash's dev tools (error
    pages with tracebacks, hot reload) and Flask's debugger and reloader
    stay off, whatever the ``DASH_*`` and ``FLASK_*`` environment says.
    Unless ``verbose``, the terminal gets neither an access-log line per
    request nor the development server's banners: the caller prints the
    one line a user needs (the URL).

    Raises
    ------
    ValueError
        If ``host`` is empty (Dash would take ``$HOST`` instead).
    """
    if not host:
        raise InputError("the host to bind must not be empty (e.g. 127.0.0.1)")
    if not verbose:
        _quiet_server(app)
    app.run(
        host=host,
        port=port,
        debug=False,
        dev_tools_ui=False,
        dev_tools_props_check=False,
        dev_tools_serve_dev_bundles=False,
        dev_tools_hot_reload=False,
        use_reloader=False,
        use_debugger=False,
        load_dotenv=False,
    )


def _quiet_server(app: dash.Dash) -> None:
    # werkzeug logs every request at INFO, Dash its URL; Flask prints a
    # banner through flask.cli, which has no switch but this one.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    app.logger.setLevel(logging.WARNING)
    flask.cli.show_server_banner = lambda *args, **kwargs: None
