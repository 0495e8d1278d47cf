"""The served comparison (``sparktrail serve --compare``) without a browser:
its layout and routes through Flask's test client, and the command's
arguments."""

from __future__ import annotations

import json

from sparktrail.cli import main
from sparktrail.dashboard.app import create_compare_app
from sparktrail.dashboard.compare_report import comparison_verdict
from sparktrail.engines.comparison import compare
from tests.engines.test_comparison import agg_runs, over_partitioned, with_hints


def test_the_layout_holds_the_verdict_waterfall_and_tables():
    before, after = agg_runs(1000, 500, props={"spark.sql.shuffle.partitions": "8"})
    c = compare(with_hints(before, over_partitioned(1.5)), after)
    client = create_compare_app(c).server.test_client()
    # the page, in the report's style
    page = client.get("/")
    assert page.status_code == 200 and b"p.verdict" in page.data
    # its layout: the verdict first, then the sections in order
    layout = json.dumps(client.get("/_dash-layout").get_json(), ensure_ascii=False)
    assert comparison_verdict(c) in layout
    order = [layout.index(f'"id": "{s}"') for s in ("verdict", "waterfall", "settings")]
    assert order == sorted(order) and layout.index('"id": "hints"') > order[-1]
    assert '"type": "waterfall"' in layout
    # nothing else is served
    assert client.get("/etc/passwd").status_code == 404


def test_serve_takes_one_thing_to_show(capsys, tmp_path):
    assert main(["serve", str(tmp_path), "--compare", "a", "b"]) != 0
    assert "--compare BEFORE AFTER" in capsys.readouterr().err
