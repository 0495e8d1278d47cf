"""The layout rules of ARCHITECTURE.md, checked on the source tree."""

from __future__ import annotations

import ast
import collections
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

#: What each stage may import from (besides itself and sparktrail.errors).
ALLOWED = {
    "pag": set(),
    "tracer": {"pag"},
    "whatif": {"pag"},
    "summaries": {"pag", "whatif"},
    "engines": {"pag", "summaries", "whatif"},
    "dashboard": {"pag", "summaries", "engines", "whatif"},
}
STAGES = tuple(ALLOWED)


def _modules(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def _imported(path: Path) -> set[str]:
    """Every sparktrail stage a module imports, at the top or in a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {
        name.split(".")[1]
        for name in names
        if name.startswith("sparktrail.") and name.split(".")[1] in STAGES
    }


@pytest.mark.parametrize("stage", STAGES)
def test_imports_go_one_way(stage):
    # GIVEN every module of a stage
    # WHEN the sparktrail stages it imports are listed
    wrong = {
        str(path.relative_to(ROOT)): sorted(_imported(path) - ALLOWED[stage] - {stage})
        for path in _modules(stage)
    }
    # THEN none is downstream of it
    assert {k: v for k, v in wrong.items() if v} == {}


def test_the_stage_list_is_the_packaging_list():
    setup = runpy.run_path(str(ROOT / "setup.py"), run_name="not_main")
    assert set(setup["STAGES"]) == {*STAGES, "sparktrail"}


def test_every_subpackage_goes_into_the_wheel():
    # GIVEN the packages setup.py derives
    derived = set(_packages_from_setup())
    # WHEN every folder with an __init__.py under a stage is named as a package
    folders = {
        ".".join(
            ["sparktrail"]
            + ([] if stage == "sparktrail" else [stage])
            + list(init.parent.relative_to(ROOT / stage).parts)
        )
        for stage in (*STAGES, "sparktrail")
        for init in (ROOT / stage).rglob("__init__.py")
    }
    # THEN each is in the wheel
    assert folders - derived == set()


def _packages_from_setup() -> list[str]:
    namespace = runpy.run_path(str(ROOT / "setup.py"), run_name="not_main")
    return list(namespace["stage_packages"]())


def test_no_two_modules_share_a_name():
    # GIVEN every module of the package (not __init__ or __main__)
    paths = [
        p
        for stage in (*STAGES, "sparktrail")
        for p in _modules(stage)
        if p.name not in ("__init__.py", "__main__.py")
    ]
    # THEN no two in different places have the same file name
    by_name = collections.defaultdict(list)
    for p in paths:
        by_name[p.name].append(str(p.relative_to(ROOT)))
    assert {k: v for k, v in by_name.items() if len(v) > 1} == {}


def _loaded_by(module: str) -> set[str]:
    """The sparktrail stages a fresh interpreter holds after ``import module``."""
    code = (
        f"import sys, {module}\n"
        "names = [n for n in sys.modules if n.startswith('sparktrail.')]\n"
        "stages = {n.split('.')[1] for n in names}\n"
        "print(' '.join(sorted(stages)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return set(out.stdout.split())


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_imports_alone(stage):
    # GIVEN a fresh interpreter  WHEN one stage is imported
    loaded = _loaded_by(f"sparktrail.{stage}")
    # THEN it loads only the stages it may import (and the errors, units
    # and lazy-export modules)
    assert loaded - {stage, "errors", "_lazy", "units"} <= ALLOWED[stage]


def test_the_errors_module_loads_nothing_else():
    assert _loaded_by("sparktrail.errors") == {"errors"}


def _private_imports(path: Path) -> set[str]:
    """``module.name`` of each private name a module imports from another stage."""
    own = path.relative_to(ROOT).parts[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
            continue
        parts = node.module.split(".")
        if parts[0] != "sparktrail" or len(parts) < 2 or parts[1] == own:
            continue
        private_module = any(p.startswith("_") for p in parts[2:])
        found.update(
            f"{node.module}.{alias.name}"
            for alias in node.names
            if private_module or alias.name.startswith("_")
        )
    return found


def test_no_stage_imports_another_stages_private_names():
    wrong = {
        str(path.relative_to(ROOT)): sorted(_private_imports(path))
        for stage in STAGES
        for path in _modules(stage)
    }
    assert {k: v for k, v in wrong.items() if v} == {}


def test_the_dashboard_starts_no_pipeline():
    # GIVEN every dashboard module  THEN none imports the engines that write
    # a store (the CLI opens the pipeline; the dashboard only reads)
    writers = {"sparktrail.engines.online", "sparktrail.engines.spark_live"}
    wrong = {}
    for path in _modules("dashboard"):
        tree = ast.parse(path.read_text(), str(path))
        found = {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module in writers
        }
        if found:
            wrong[str(path.relative_to(ROOT))] = sorted(found)
    assert wrong == {}


def _drawn_import_edges() -> dict[str, set[str]]:
    """Stage -> the stages it imports, as ARCHITECTURE.md's edge table says."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    table = text.split("<!-- import-edges -->")[1].split("<!-- /import-edges -->")[0]
    drawn = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            drawn[cells[0].strip("`")] = set(re.findall(r"`(\w+)`", cells[1]))
    return drawn


def test_the_drawn_import_graph_is_the_real_one():
    # GIVEN the stage-to-stage imports that ARCHITECTURE.md draws
    drawn = _drawn_import_edges()
    # WHEN every module's imports of other stages are read from the source
    real = {
        stage: set().union(*(_imported(path) for path in _modules(stage))) - {stage}
        for stage in (*STAGES, "sparktrail")
    }
    # THEN the drawing has exactly those edges
    assert drawn == real
