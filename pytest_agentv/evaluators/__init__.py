"""The one evaluator registry: the built-in kinds, the kinds plugins and conftests add through the
``pytest_agentv_make_evaluator`` hook, and one rule for a kind nobody answers.

The hook is asked first (through the caller's hook proxy, so a ``conftest.py`` adds kinds for its
own folder); pytest-agentv's own hook implementation answers last with the built-ins. Eval files
and ``assert_judged`` resolve every kind before anything runs, so an unknown kind is an error
that names it, the closest known kind and every kind known so far.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from ..errors import ConfigError, did_you_mean
from ..loader import EntryProblem
from ..schema.evaluators import EvaluatorConfig
from ..spellings import KIND_ALIASES, canonical_kind, later_kind_version
from .base import Evaluator, ResolveJudge, walk_entries
from .code_judge import CodeEvaluator
from .composite import CompositeEvaluator
from .cost import CostEvaluator
from .execution_metrics import ExecutionMetricsEvaluator
from .field_accuracy import FieldAccuracyEvaluator
from .latency import LatencyEvaluator
from .llm_judge import LlmJudgeEvaluator
from .scripts import DEFAULT_SCRIPT_TIMEOUT
from .skill_trigger import SkillTriggerEvaluator
from .textchecks import CHECKS, TextCheckEvaluator
from .token_usage import TokenUsageEvaluator
from .tool_trajectory import ToolTrajectoryEvaluator

#: The evaluator kinds built into pytest-agentv (``code`` and ``rubric`` are accepted aliases).
EVALUATOR_KINDS: tuple[str, ...] = (
    "llm_judge",
    "code_judge",
    "tool_trajectory",
    "field_accuracy",
    "latency",
    "cost",
    "token_usage",
    "composite",
    *CHECKS,
    "execution_metrics",
    "skill_trigger",
)

AskHook = Callable[[str], Evaluator | None]


def is_evaluator_kind(value: object) -> bool:
    return isinstance(value, str) and canonical_kind(value) in EVALUATOR_KINDS


def build_evaluator_registry(
    overrides: Mapping[str, Evaluator] | None = None,
    resolve_judge_provider: ResolveJudge | None = None,
    *,
    script_timeout: float = DEFAULT_SCRIPT_TIMEOUT,
    env_passthrough: Sequence[str] = (),
) -> dict[str, Evaluator]:
    """Built-in evaluators by kind, with ``overrides`` replacing or adding kinds (REQ-EVAL-006).

    A composite runs its members with the case's evaluators; called on its own, with these.
    """
    judge = LlmJudgeEvaluator(
        resolve_judge_provider=resolve_judge_provider,
        prompt_timeout=script_timeout,
        env_passthrough=env_passthrough,
    )
    registry: dict[str, Evaluator] = {
        "llm_judge": judge,
        "code_judge": CodeEvaluator(
            default_timeout=script_timeout, env_passthrough=env_passthrough
        ),
        "tool_trajectory": ToolTrajectoryEvaluator(),
        "field_accuracy": FieldAccuracyEvaluator(),
        "latency": LatencyEvaluator(),
        "cost": CostEvaluator(),
        "token_usage": TokenUsageEvaluator(),
        **{kind: TextCheckEvaluator(kind) for kind in CHECKS},
        "execution_metrics": ExecutionMetricsEvaluator(),
        "skill_trigger": SkillTriggerEvaluator(),
    }
    registry["composite"] = CompositeEvaluator(
        judge, registry, script_timeout=script_timeout, env_passthrough=env_passthrough
    )
    registry.update(overrides or {})
    return registry


class EvaluatorRegistry:
    """Evaluators by kind for one run: the hook's answers over the built-ins.

    ``scoped(ask)`` gives the view of one hook proxy (one eval file's folder, or one test);
    each view asks the hook once per kind.
    """

    def __init__(self, builtins: Mapping[str, Evaluator]) -> None:
        self.builtins = dict(builtins)
        self._added: set[str] = set()

    def builtin(self, kind: str) -> Evaluator | None:
        return self.builtins.get(canonical_kind(kind))

    def known_kinds(self) -> list[str]:
        """Built-in kinds, their aliases, and the kinds hooks have answered in this run."""
        aliases = {alias for alias, kind in KIND_ALIASES.items() if kind in self.builtins}
        return sorted({*self.builtins, *aliases, *self._added})

    def scoped(self, ask: AskHook) -> ScopedRegistry:
        return ScopedRegistry(self, ask)

    def remember(self, kind: str, evaluator: Evaluator | None) -> None:
        """Note a kind a hook answered, so errors about unknown kinds can list it."""
        if evaluator is not None and evaluator is not self.builtin(kind):
            self._added.add(kind)


class ScopedRegistry:
    """The registry as one hook proxy sees it."""

    def __init__(self, registry: EvaluatorRegistry, ask: AskHook) -> None:
        self.registry = registry
        self._ask = ask
        self._found: dict[str, Evaluator | None] = {}

    def get(self, kind: str) -> Evaluator | None:
        if kind not in self._found:
            evaluator = self._found[kind] = self._ask(kind)
            self.registry.remember(kind, evaluator)
        return self._found[kind]

    def problem(self, kind: str) -> str | None:
        """Why ``kind`` cannot be used here, or None when some evaluator answers it."""
        if self.get(kind) is not None:
            return None
        version = later_kind_version(kind)
        if version is not None:
            return (
                f"evaluator type '{kind}' was introduced in AgentV {version} and pytest-agentv "
                "does not implement it yet (it is never replaced by the default judge); add it "
                "with the pytest_agentv_make_evaluator hook"
            )
        known = self.registry.known_kinds()
        return (
            f"unknown evaluator type '{kind}'{did_you_mean(kind, known)}; known: "
            f"{', '.join(known)}. Add kinds with the pytest_agentv_make_evaluator hook (AgentV "
            "v2.10 and later also look for a TypeScript custom assertion of that name in "
            ".agentv/assertions/, which pytest-agentv does not run)"
        )

    def entry_needs(self, kind: str) -> str | None:
        """What a kind cannot grade without (a script, its settings), so that it cannot be a
        file's default kind: an entry of its own must give it."""
        needs = getattr(self.get(kind), "entry_needs", None)
        return needs if isinstance(needs, str) else None

    def check_entry(
        self, entry: EvaluatorConfig, folder: Path, rootdir: Path
    ) -> Iterable[EntryProblem]:
        """What the entry's kind checks when the file loads (its ``check_entry``, if it has
        one): files it names, weights that cannot score."""
        check = getattr(self.get(entry.type), "check_entry", None)
        return check(entry, folder, rootdir) if callable(check) else ()

    def evaluators_for(self, entries: Iterable[EvaluatorConfig]) -> dict[str, Evaluator]:
        """The evaluator of each entry's kind, composite members included; ``ConfigError`` for
        a kind nobody answers."""
        found: dict[str, Evaluator] = {}
        for entry in walk_entries(entries):
            evaluator = self.get(entry.type)
            if evaluator is None:
                raise ConfigError(self.problem(entry.type))
            found[entry.type] = evaluator
        return found
