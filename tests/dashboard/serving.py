"""A Dash app on a free local port, served from a thread (imported by name)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import dash


@contextmanager
def served(app: dash.Dash) -> Iterator[int]:
    """Serve ``app`` on 127.0.0.1 (threaded werkzeug); yield its port."""
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = make_server("127.0.0.1", 0, app.server, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
