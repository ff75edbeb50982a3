"""One exception hierarchy, so every layer can tell bad input from an unavailable service."""

from __future__ import annotations

import warnings


class AgentvError(Exception):
    """Base of everything pytest-agentv raises on purpose; its message is shown as is."""


class EvalFileError(AgentvError):
    """An eval or targets file is invalid; the message points at file, line and field."""

    def __init__(self, path: str, line: int, col: int, message: str) -> None:
        self.path = path
        self.line = line
        self.col = col
        self.message = message
        super().__init__(f"{path}:{line}:{col}: {message}")


class ConfigError(AgentvError):
    """The run is misconfigured for this case: unknown target, unset variable, missing file."""


class NotGradedError(AgentvError):
    """The case could not be graded: its target or a judge was unavailable."""


class ReplayMissError(NotGradedError):
    """Replay mode found no stored reply for a request it would have to send."""


class JudgeNotConfiguredError(AgentvError):
    """An LLM judge is needed but none is configured; the case is skipped, not failed."""


class AgentvWarning(UserWarning):
    """Problems in eval files that do not stop them from running (unknown keys, for instance)."""


class AgentvDeprecationWarning(AgentvWarning, DeprecationWarning):
    """Legacy AgentV spellings that still work (``grader:``, ``type: rubric``)."""


def warn_at(path: str, line: int, message: str, category: type[Warning] = AgentvWarning) -> None:
    """Emit a warning attributed to a line of a YAML file rather than to our own code."""
    warnings.warn_explicit(message, category, filename=path, lineno=line)
