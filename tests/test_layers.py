"""The layers of DESIGN.md hold: import-linter's contracts pass, and catch an upward import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_agentv

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(pytest_agentv.__file__).resolve().parent


def lint_imports(project: Path) -> subprocess.CompletedProcess[str]:
    linter = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(linter), "--no-cache"],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(project)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def copy_project(tmp_path: Path) -> Path:
    shutil.copytree(
        PACKAGE, tmp_path / "pytest_agentv", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_package_keeps_its_layers_and_has_no_cycles(tmp_path: Path) -> None:
    result = lint_imports(copy_project(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "upward", "broken"),
    [
        (
            "settings.py",
            "from .runner import AgentvRun",
            "pytest_agentv.settings is not allowed to import pytest_agentv.runner",
        ),
        (
            "results/__init__.py",
            "from ..evaluators.base import EvaluationScore",
            "pytest_agentv.results is not allowed to import pytest_agentv.evaluators",
        ),
        # Same layer, but evaluators read the case: importing them back is a cycle.
        ("cases.py", "from .evaluators.base import Evaluator", "No cycles are allowed"),
    ],
)
def test_an_upward_import_breaks_the_contract(
    tmp_path: Path, module: str, upward: str, broken: str
) -> None:
    project = copy_project(tmp_path)
    path = project / "pytest_agentv" / module
    # Even an import made only for type checking counts.
    path.write_text(
        path.read_text()
        + f"\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    {upward}\n"
    )
    result = lint_imports(project)
    assert result.returncode != 0
    assert broken in result.stdout
