"""The coding agents' CLIs the tests run, installed from npm at pinned versions into a cache
folder keyed by those versions, so that later runs (and CI's next one) reuse them.

``python -m tests.agent_clis`` installs them and prints their folder (``.ci/run`` does, before
the tests; it exits 3, saying why, where they cannot be installed). The ``agent_bin`` fixture
(this module is a plugin of ``tests/conftest.py``) installs them on first use, one process at a
time (a lock file: pytest-xdist's workers share the folder), and skips a test, saying why, only
where npm is missing or cannot reach its registry.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

#: Provider → (npm package, pinned version, program).
PINNED = {
    "claude-cli": ("@anthropic-ai/claude-code", "2.1.332", "claude"),
    "codex": ("@openai/codex", "0.171.0", "codex"),
    "gemini-cli": ("@google/gemini-cli", "0.61.0", "gemini"),
    "copilot-cli": ("@github/copilot", "1.0.102", "copilot"),
    "pi-cli": ("@mariozechner/pi-coding-agent", "0.73.1", "pi"),
}
#: What npm says when it cannot reach its registry.
_OFFLINE = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ECONNRESET", "network")


def _folder() -> Path:
    """Where these versions are installed."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    specs = sorted(f"{package}@{version}" for package, version, _ in PINNED.values())
    key = hashlib.sha256("\n".join(specs).encode()).hexdigest()[:16]
    return cache / "pytest-agentv" / "agents" / key


#: Found when the tests start: pytester gives each test a ``HOME`` of its own.
FOLDER = _folder()


def install() -> Path | str:
    """The folder of the installed programs, installing them if they are not; or why they
    cannot be installed here (npm missing or offline). Any other failure raises."""
    target = FOLDER
    done = target / ".complete"
    if done.exists():
        return target / "node_modules" / ".bin"
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed (Debian: apt-get install nodejs npm)"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            specs = [f"{package}@{version}" for package, version, _ in PINNED.values()]
            target.mkdir(exist_ok=True)
            options = ["--no-audit", "--no-fund", "--no-save", "--loglevel=error"]
            run = subprocess.run(
                [npm, "install", "--prefix", str(target), *options, *specs],
                capture_output=True,
                text=True,
                check=False,
            )
            if run.returncode != 0:
                said = (run.stderr or run.stdout)[-2000:]
                if any(word in said for word in _OFFLINE):
                    return f"npm cannot reach its registry: {said.strip().splitlines()[-1]}"
                raise RuntimeError(f"npm install {' '.join(specs)} failed:\n{said}")
            done.touch()
    return target / "node_modules" / ".bin"


@pytest.fixture(scope="session")
def agent_bin() -> Path:
    """The folder of the agents' programs (installed on first use), or the test is skipped
    saying why they cannot be installed here."""
    found = install()
    if isinstance(found, str):
        pytest.skip(f"the coding agents' CLIs cannot be installed: {found}")
    return found


if __name__ == "__main__":
    found = install()
    print(found)
    sys.exit(0 if isinstance(found, Path) else 3)  # 3: they cannot be installed here
