"""The one evaluator registry: the built-in kinds, the kinds plugins and conftests add through the
``pytest_agentv_make_evaluator`` hook, and one rule for a kind nobody answers.

The hook is asked first (through the caller's hook proxy, so a ``conftest.py`` adds kinds for its
own folder); pytest-agentv's own hook implementation answers last with the built-ins. Eval files
and ``assert_judged`` resolve every kind before anything runs, so an unknown kind is an error
that names it, the closest known kind and every kind known so far.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError, did_you_mean
from ..loader import EntryProblem
from ..schema.evaluators import EvaluatorConfig
from ..spellings import KIND_ALIASES, canonical_kind, later_kind_version
from .base import Evaluator, ResolveJudge, walk_entries
from .scripts import DEFAULT_SCRIPT_TIMEOUT
from .textchecks import CHECKS

if TYPE_CHECKING:
    from .llm_judge import LlmJudgeEvaluator

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
) -> Mapping[str, Evaluator]:
    """Built-in evaluators by kind, with ``overrides`` replacing or adding kinds (REQ-EVAL-006).

    A composite runs its members with the case's evaluators; called on its own, with these.
    """
    return BuiltinEvaluators(
        overrides or {},
        resolve_judge_provider,
        script_timeout=script_timeout,
        env_passthrough=tuple(env_passthrough),
    )


class BuiltinEvaluators(Mapping[str, Evaluator]):
    """The built-in evaluators, each made (and its module imported) when it is first looked up:
    a run imports only the kinds its files use, which is most of what start-up costs."""

    def __init__(
        self,
        overrides: Mapping[str, Evaluator],
        resolve_judge_provider: ResolveJudge | None,
        *,
        script_timeout: float,
        env_passthrough: tuple[str, ...],
    ) -> None:
        self._made: dict[str, Evaluator] = dict(overrides)
        self._resolve_judge = resolve_judge_provider
        self._timeout = script_timeout
        self._env = env_passthrough
        self._judge: LlmJudgeEvaluator | None = None

    def __getitem__(self, kind: str) -> Evaluator:
        if kind not in self._made:
            if kind not in EVALUATOR_KINDS:
                raise KeyError(kind)
            self._made[kind] = self._make(kind)
        return self._made[kind]

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(EVALUATOR_KINDS), **self._made})

    def __len__(self) -> int:
        return len({*EVALUATOR_KINDS, *self._made})

    def __contains__(self, kind: object) -> bool:
        return kind in self._made or kind in EVALUATOR_KINDS

    def builtin_judge(self) -> LlmJudgeEvaluator:
        """The built-in ``llm_judge``, also when an override replaces that kind: a composite's
        judge aggregator is always this one."""
        if self._judge is None:
            from .llm_judge import LlmJudgeEvaluator

            self._judge = LlmJudgeEvaluator(
                resolve_judge_provider=self._resolve_judge,
                prompt_timeout=self._timeout,
                env_passthrough=self._env,
            )
        return self._judge

    def _make(self, kind: str) -> Evaluator:
        if kind in CHECKS:
            from .textchecks import TextCheckEvaluator

            return TextCheckEvaluator(kind)
        if kind == "llm_judge":
            return self.builtin_judge()
        if kind == "code_judge":
            from .code_judge import CodeEvaluator

            return CodeEvaluator(default_timeout=self._timeout, env_passthrough=self._env)
        if kind == "composite":
            from .composite import CompositeEvaluator

            return CompositeEvaluator(
                self.builtin_judge(),
                self,
                script_timeout=self._timeout,
                env_passthrough=self._env,
            )
        return _settings_free(kind)


def _settings_free(kind: str) -> Evaluator:
    """The kinds made without the run's settings."""
    if kind == "tool_trajectory":
        from .tool_trajectory import ToolTrajectoryEvaluator

        return ToolTrajectoryEvaluator()
    if kind == "field_accuracy":
        from .field_accuracy import FieldAccuracyEvaluator

        return FieldAccuracyEvaluator()
    if kind == "latency":
        from .latency import LatencyEvaluator

        return LatencyEvaluator()
    if kind == "cost":
        from .cost import CostEvaluator

        return CostEvaluator()
    if kind == "token_usage":
        from .token_usage import TokenUsageEvaluator

        return TokenUsageEvaluator()
    if kind == "execution_metrics":
        from .execution_metrics import ExecutionMetricsEvaluator

        return ExecutionMetricsEvaluator()
    if kind == "skill_trigger":
        from .skill_trigger import SkillTriggerEvaluator

        return SkillTriggerEvaluator()
    raise KeyError(kind)


class EvaluatorRegistry:
    """Evaluators by kind for one run: the hook's answers over the built-ins.

    ``scoped(ask)`` gives the view of one hook proxy (one eval file's folder, or one test);
    each view asks the hook once per kind.
    """

    def __init__(self, builtins: Mapping[str, Evaluator]) -> None:
        self.builtins = builtins
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
