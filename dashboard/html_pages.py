"""One writer for the self-contained HTML pages (report, comparison, fleet).

Each page is a complete document with its style inlined, written to a
temporary name and renamed into place, so a reader (a browser, the
dashboard's ``serve --report``) never sees half a page.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

__all__ = ["write_page"]


def write_page(
    target: str | os.PathLike[str], title: str, style: str, body: str, script: str = ""
) -> Path:
    """Write an HTML page to ``target`` (its folder created if missing).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     page = write_page(Path(d) / "p.html", "a < b", "", "<p>hi</p>")
    ...     "<title>a &lt; b</title>" in page.read_text()
    True
    """
    scripts = f"<script>{script}</script>" if script else ""
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{style}</style></head>"
        f"<body>{body}{scripts}</body></html>\n"
    )
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(page, encoding="utf-8")
    os.replace(temporary, path)
    return path
