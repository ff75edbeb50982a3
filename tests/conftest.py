"""Shared fixtures: a pytester project with a mock target and a keyword code judge.

The loopback model server and its fixtures (``fake_server``, ``fake_llm``) come from the
``tests.fake_openai`` plugin.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import hypothesis.internal.observability  # noqa: F401
import pytest
from hypothesis import settings

import pytest_agentv
from tests.helpers import DEEP_EXAMPLES, freeze_what_is_loaded, judge_ini

if TYPE_CHECKING:
    from tests.fake_openai import FakeOpenAI

pytest_plugins = [
    "tests.fake_openai",
    "tests.fake_vendors",
    "tests.agent_clis",
    "tests.redis_server",
]

# The processes the tests start (pytest sessions, xdist workers, code judges) keep the bytecode
# they compile: with PYTHONDONTWRITEBYTECODE set, each of them compiled the plugin anew (about a
# fifth of the suite's time on this kind of machine).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# Property and fuzz tests take their example counts from the hypothesis profile (see
# ``tests.helpers.examples``). "default" is what ``pytest -n auto`` runs; CI also runs the
# property and fuzz modules with ``--hypothesis-profile=deep``, ten times as many examples.
# hypothesis's pytest plugin loads a profile named on the command line after this file is read.
settings.register_profile("default", max_examples=DEEP_EXAMPLES // 10)
settings.register_profile("deep", max_examples=DEEP_EXAMPLES)
settings.load_profile("default")

INI = """
[pytest]
asyncio_default_fixture_loop_scope = function
"""

KEYWORDS_JUDGE = """\
import json, sys

payload = json.load(sys.stdin)
words = (payload.get("config") or {}).get("keywords", [])
answer = payload["candidate_answer"].lower()
hits = [w for w in words if w.lower() in answer]
misses = [w for w in words if w.lower() not in answer]
print(json.dumps({
    "score": len(hits) / len(words) if words else 1.0,
    "hits": ["mentions " + w for w in hits],
    "misses": ["does not mention " + w for w in misses],
    "reasoning": f"{len(hits)} of {len(words)} keywords",
}))
"""

EXPECT_JUDGE = """\
import json, sys

payload = json.load(sys.stdin)
config = payload.get("config") or {}
answer = payload["candidate_answer"]
checks = []
if "expect" in config:
    checks.append((answer == config["expect"], f"answer is {answer!r}"))
for key, value in (config.get("payload") or {}).items():
    checks.append((payload.get(key) == value, f"{key} is {payload.get(key)!r}"))
print(json.dumps({
    "score": 1.0 if all(ok for ok, _ in checks) else 0.0,
    "hits": [text for ok, text in checks if ok],
    "misses": [text for ok, text in checks if not ok],
}))
"""

TARGETS = """\
targets:
  - name: default
    provider: mock
    response: "Refunds are accepted within 30 days of purchase."
  - name: wrong
    provider: mock
    response: "We never give refunds."
"""


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests never see a developer's own judge settings or provider keys, nor a CI job's
    summary file (their runs would append to it), nor the setting the litellm transport leaves
    behind once it has imported litellm in this process."""
    for name in list(os.environ):
        if name.startswith("AGENTV_") or name.endswith(("_API_KEY", "_API_BASE", "_STEP_SUMMARY")):
            monkeypatch.delenv(name)
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)
    yield


@pytest.fixture(scope="session", autouse=True)
def _loaded_objects_frozen() -> None:
    """The plugin imported whole, and what is loaded then kept for the whole session.

    pytester restores sys.modules after every in-process run, so anything first imported inside
    a run is imported again by the next one (and the copies it dropped stay referenced from
    caches, for every later garbage collection to walk). Importing the plugin whole, once per
    process that runs tests (not in an xdist controller, which runs none), keeps each inner run
    from importing evaluators, targets and reports anew."""
    for module in pkgutil.walk_packages(pytest_agentv.__path__, "pytest_agentv."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    freeze_what_is_loaded()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Two workers more than there are cores: about a third of the suite's time is spent
    waiting (on loopback servers, child processes and timeouts), which other workers fill. On
    this 2-core machine: 159 s with 2 workers, 136 s with 3, 132 s with 4."""
    return (os.cpu_count() or 1) + 2


#: The sessions a test runs load the plugins they use by module (``PYTEST_PLUGINS``), with
#: autoloading off: pytest then does not scan every installed distribution's files for plugin
#: modules to rewrite, which cost each new process (an xdist worker, a subprocess run) about a
#: tenth of a second here; hypothesis's plugin, which they never use, cost more than half a
#: second. An in-process session is handed the modules themselves, already registered under
#: those names, because pytest reads every distribution's entry points for each name it loads.
#: A session that stops at a collection error has pytest render a long traceback of its own
#: interruption (a quarter of a second, parsing its own sources), which is never shown: the
#: sessions go on past collection errors, which they report all the same. And the sessions leave
#: unraisable exceptions to this one, which turns them into errors (pytest's own hook for them
#: runs a full garbage collection five times at the end of every session).
INNER_PLUGINS = "pytest_agentv.plugin,xdist.plugin,pytest_asyncio.plugin"
INNER_ADDOPTS = "--continue-on-collection-errors -p no:unraisableexception"


@pytest.fixture(autouse=True)
def _quiet_inner_sessions(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Give every pytester session an ini file, so plugins do not warn about unset options, and
    the plugins it uses, no others."""
    if "pytester" in request.fixturenames:
        pytester: pytest.Pytester = request.getfixturevalue("pytester")
        pytester.makeini(INI)
        monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        monkeypatch.setenv("PYTEST_PLUGINS", INNER_PLUGINS)
        monkeypatch.setenv("PYTEST_ADDOPTS", INNER_ADDOPTS)
        monkeypatch.setattr(pytester, "inline_run", _with_inner_plugins(pytester.inline_run))


def _with_inner_plugins(inline_run: Callable[..., pytest.HookRecorder]) -> Callable[..., Any]:
    """``inline_run`` handing the session the modules ``PYTEST_PLUGINS`` names, as it is when the
    run starts (a test may unset it)."""

    def run(*args: Any, plugins: Sequence[Any] = (), **kwargs: Any) -> pytest.HookRecorder:
        names = [name for name in os.environ.get("PYTEST_PLUGINS", "").split(",") if name]
        modules = [importlib.import_module(name) for name in names]
        return inline_run(*args, plugins=[*modules, *plugins], **kwargs)

    return run


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester folder with a mock targets file, an ini file and a keyword code judge."""
    (pytester.path / ".agentv").mkdir()
    (pytester.path / ".agentv" / "targets.yaml").write_text(TARGETS)
    (pytester.path / "keywords.py").write_text(KEYWORDS_JUDGE)
    (pytester.path / "expect.py").write_text(EXPECT_JUDGE)
    return pytester


@pytest.fixture(params=[[], ["-n", "2"]], ids=["serial", "xdist"])
def run_args(request: pytest.FixtureRequest) -> list[str]:
    """Run a pytester session serially and under pytest-xdist."""
    return list(request.param)


@pytest.fixture
def judged(project: pytest.Pytester, fake_llm: FakeOpenAI) -> pytest.Pytester:
    """A project whose LLM judge is the fake server."""
    project.makeini(judge_ini(fake_llm))
    return project
