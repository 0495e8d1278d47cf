"""Packaging: the stage folders at the top install as ``sparktrail.<stage>``.

The package list is derived from the folders (every folder under a stage
with an ``__init__.py``), so a new subpackage cannot be left out of the
wheel. Everything else is in pyproject.toml.
"""

from setuptools import find_packages, setup

#: Top-level folder -> installed package (DESIGN §2).
STAGES = {
    "sparktrail": "sparktrail",
    "tracer": "sparktrail.tracer",
    "pag": "sparktrail.pag",
    "whatif": "sparktrail.whatif",
    "summaries": "sparktrail.summaries",
    "engines": "sparktrail.engines",
    "dashboard": "sparktrail.dashboard",
}


def stage_packages() -> list[str]:
    packages = []
    for folder, package in STAGES.items():
        packages.append(package)
        packages += [f"{package}.{sub}" for sub in find_packages(folder)]
    return packages


# Guarded so that tests can read STAGES and stage_packages (setuptools runs
# this file as __main__).
if __name__ == "__main__":
    setup(
        packages=stage_packages(),
        package_dir={package: folder for folder, package in STAGES.items()},
    )
