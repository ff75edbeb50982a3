"""One exception hierarchy, so every layer can tell bad input from an unavailable service."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


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


class DuplicateKeyError(ValueError):
    """JSON data gives a key twice: which of its values was meant is unknown (``json`` would
    silently keep the last one), so nothing read from it counts."""


class JudgeNotConfiguredError(AgentvError):
    """An LLM judge is needed but none is configured; the case is skipped, not failed."""


class AgentvWarning(UserWarning):
    """Problems in eval files that do not stop them from running (unknown keys, for instance)."""


class AgentvCalibrationWarning(AgentvWarning):
    """The judge failed calibration and ``--agentv-calibration-mode warn`` graded anyway."""


class AgentvDeprecationWarning(AgentvWarning, DeprecationWarning):
    """Legacy AgentV spellings that still work (``grader:``, ``type: rubric``)."""


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest known spelling of a typo, else nothing."""
    close = difflib.get_close_matches(word, list(known), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""
