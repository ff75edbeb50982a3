"""Small helpers shared by the test modules."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.fake_openai import FakeOpenAI


def write(pytester: pytest.Pytester, name: str, content: str) -> Path:
    """Write a (dedented) file under the pytester folder, creating folders as needed."""
    path = pytester.path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(content))
    return path


def judge_ini(server: FakeOpenAI, model: str = "openai/fake-judge", **extra: str) -> str:
    lines = [
        "[pytest]",
        "asyncio_default_fixture_loop_scope = function",
        f"agentv_judge_model = {model}",
        f"agentv_judge_api_base = {server.api_base}",
        "agentv_judge_backoff = 0.01",
        "agentv_cache_mode = off",
        *(f"agentv_{key} = {value}" for key, value in extra.items()),
    ]
    return "\n".join(lines) + "\n"
