"""Small helpers shared by the test modules."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest


def write(pytester: pytest.Pytester, name: str, content: str) -> Path:
    """Write a (dedented) file under the pytester folder, creating folders as needed."""
    path = pytester.path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(content))
    return path
