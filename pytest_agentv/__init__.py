"""pytest-agentv: AgentV eval files as pytest tests, and LLM-judged assertions for unit tests.

The public API is re-exported here lazily, so that loading the pytest plugin in a project
without eval files does not import pydantic, YAML or litellm.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .answers import TargetResponse
    from .assertions import AgentvJudge, JudgedAssertionError, assert_judged, assert_judged_async
    from .assertions.conversation import assert_conversation, assert_conversation_async
    from .cases import PreparedCase
    from .errors import (
        AgentvDeprecationWarning,
        AgentvError,
        AgentvWarning,
        ConfigError,
        EvalFileError,
        JudgeNotConfiguredError,
        NotGradedError,
        ReplayMissError,
    )
    from .evaluators import EVALUATOR_KINDS, build_evaluator_registry, is_evaluator_kind
    from .evaluators.base import (
        CaseEvaluation,
        EvaluationContext,
        EvaluationScore,
        Evaluator,
        EvaluatorResult,
        run_evaluators_for_case,
    )
    from .evaluators.code_judge import CodeEvaluator
    from .evaluators.llm_judge import LlmJudgeEvaluator
    from .llm.client import JudgeClient
    from .schema.evalfile import EvalCase, EvalSuite
    from .schema.evaluators import EvaluatorConfig
    from .schema.rubrics import RubricItem
    from .targets.base import Target, TargetDefinition
    from .targets.kinds import TARGET_KINDS
    from .verdicts import score_to_verdict

_EXPORTS = {
    "AgentvJudge": "assertions",
    "JudgedAssertionError": "assertions",
    "assert_judged": "assertions",
    "assert_judged_async": "assertions",
    "AgentvDeprecationWarning": "errors",
    "AgentvError": "errors",
    "AgentvWarning": "errors",
    "ConfigError": "errors",
    "EvalFileError": "errors",
    "JudgeNotConfiguredError": "errors",
    "NotGradedError": "errors",
    "ReplayMissError": "errors",
    "EVALUATOR_KINDS": "evaluators",
    "CaseEvaluation": "evaluators.base",
    "EvaluationContext": "evaluators.base",
    "EvaluationScore": "evaluators.base",
    "Evaluator": "evaluators.base",
    "EvaluatorResult": "evaluators.base",
    "PreparedCase": "cases",
    "assert_conversation": "assertions.conversation",
    "assert_conversation_async": "assertions.conversation",
    "build_evaluator_registry": "evaluators",
    "is_evaluator_kind": "evaluators",
    "run_evaluators_for_case": "evaluators.base",
    "CodeEvaluator": "evaluators.code_judge",
    "LlmJudgeEvaluator": "evaluators.llm_judge",
    "JudgeClient": "llm.client",
    "EvalCase": "schema.evalfile",
    "EvalSuite": "schema.evalfile",
    "EvaluatorConfig": "schema.evaluators",
    "RubricItem": "schema.rubrics",
    "TARGET_KINDS": "targets.kinds",
    "Target": "targets.base",
    "TargetDefinition": "targets.base",
    "TargetResponse": "answers",
    "score_to_verdict": "verdicts",
}

__all__ = [
    "EVALUATOR_KINDS",
    "TARGET_KINDS",
    "AgentvDeprecationWarning",
    "AgentvError",
    "AgentvJudge",
    "AgentvWarning",
    "CaseEvaluation",
    "CodeEvaluator",
    "ConfigError",
    "EvalCase",
    "EvalFileError",
    "EvalSuite",
    "EvaluationContext",
    "EvaluationScore",
    "Evaluator",
    "EvaluatorConfig",
    "EvaluatorResult",
    "JudgeClient",
    "JudgeNotConfiguredError",
    "JudgedAssertionError",
    "LlmJudgeEvaluator",
    "NotGradedError",
    "PreparedCase",
    "ReplayMissError",
    "RubricItem",
    "Target",
    "TargetDefinition",
    "TargetResponse",
    "__version__",
    "assert_conversation",
    "assert_conversation_async",
    "assert_judged",
    "assert_judged_async",
    "build_evaluator_registry",
    "is_evaluator_kind",
    "run_evaluators_for_case",
    "score_to_verdict",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("pytest-agentv")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_agentv' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
