"""sparktrail in a real notebook kernel (issue 44, item 2): a notebook run by
nbclient on ipykernel, as Jupyter runs it, with its own local[2]
SparkSession: the ``%%sparktrail`` cell magic profiles its cell alone, and
a profile renders as HTML.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from tests.paths import SHARED_LOG

pytestmark = pytest.mark.integration

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("pyspark")

LOG = SHARED_LOG

CELLS = [
    f"""import os
os.environ["PYSPARK_PYTHON"] = {sys.executable!r}
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]")
         .config("spark.ui.enabled", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
spark.range(100).count()""",
    "%load_ext sparktrail.notebook",
    """%%sparktrail
import time
spark.sparkContext.parallelize(range(8), 8).map(
    lambda x: time.sleep(2.0) if x == 3 else x).count()""",
    f"""import sparktrail
sparktrail.profile({str(LOG)!r})""",
    "spark.stop()",
]


def _html(cell: Any) -> str:
    """The HTML a cell displayed (its result or a display call)."""
    return "".join(
        out.get("data", {}).get("text/html", "")
        for out in cell.outputs
        if out.output_type in ("execute_result", "display_data")
    )


@pytest.fixture(scope="module")
def ran() -> Any:
    book = nbformat.v4.new_notebook()
    book.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    client = nbclient.NotebookClient(book, timeout=240, kernel_name="python3")
    client.execute()
    return book


def test_the_cell_magic_shows_the_cells_own_profile(ran: Any) -> None:
    cell = ran.cells[2]
    page = _html(cell)
    # THEN the cell's result is its profile, as HTML: the verdict names the
    # partition that slept, not the session's start-up before the cell
    assert 'id="verdict"' in page
    assert "partition 3" in page
    assert "Start-up" not in page


def test_a_profile_renders_as_html(ran: Any) -> None:
    page = _html(ran.cells[3])
    assert 'id="verdict"' in page and "local-1532512550423" in page
