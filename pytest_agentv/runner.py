"""One case, start to end: read its files, pick its target, get the answer, run its evaluators.

``AgentvRun`` is the run-wide state (settings, targets files, model clients, the replay store
and the scheduler). ``run_case`` never raises: every way a case can end becomes a ``CaseResult``
— graded, not graded (error) or skipped — which the pytest item turns into an outcome.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

from .errors import AgentvError, ConfigError, JudgeNotConfiguredError
from .evaluators.base import (
    CaseEvaluation,
    EvaluationContext,
    Evaluator,
    PreparedCase,
    lookup_evaluator,
    run_evaluators_for_case,
)
from .evaluators.code_judge import CodeEvaluator
from .evaluators.llm_judge import LlmJudgeEvaluator
from .judge import LlmClient, ModelSpec, RetryPolicy, Usage, current_usage
from .loader import (
    LoadedFile,
    LoadedTargets,
    display_path,
    load_targets_file,
    read_reference,
    resolve_reference,
    search_roots,
)
from .models import EvalCase, EvalSuite, EvaluatorConfig, Message, canonical_kind, render_content
from .redaction import redact, redact_obj, refresh_secrets
from .replay import ReplayStore
from .scheduler import Scheduler
from .settings import run_key, settings_key
from .targets import (
    LLM_PROVIDERS,
    FixtureTarget,
    Target,
    TargetResponse,
    build_target,
    interpolate,
    model_spec,
)

if TYPE_CHECKING:
    from .settings import Settings

Status = Literal["graded", "error", "skipped"]
TARGETS_FILE_NAMES = (".agentv/targets.yaml", ".agentv/targets.yml", "targets.yaml", "targets.yml")


def effective_evaluators(case: EvalCase, suite: EvalSuite) -> tuple[EvaluatorConfig, ...]:
    """Case ``execution.evaluators`` > case ``evaluators`` > suite ``execution.evaluators`` >
    the case's or file's default kind; inline ``rubrics`` become a judge named ``rubric`` first."""
    explicit = (
        (case.execution.evaluators if case.execution else None)
        or case.evaluators
        or (suite.execution.evaluators if suite.execution else None)
        or []
    )
    entries = list(explicit)
    if case.rubrics:
        names = {entry.name for entry in entries}
        name = "rubric" if "rubric" not in names else "inline-rubric"
        entries.insert(0, EvaluatorConfig(name=name, type="llm_judge", rubrics=case.rubrics))
    if not entries:
        kind = case.evaluator or case.grader or suite.evaluator or suite.grader or "llm_judge"
        entries.append(EvaluatorConfig.model_construct(name=kind, type=kind, weight=1.0, config={}))
    return tuple(entries)


@dataclass(frozen=True)
class CaseSpec:
    """What an eval item needs to run its case; shared file data is not copied."""

    loaded: LoadedFile
    index: int
    evaluators: tuple[EvaluatorConfig, ...]
    registry: Mapping[str, Evaluator]

    @property
    def case(self) -> EvalCase:
        return self.loaded.suite.evalcases[self.index]

    @property
    def line(self) -> int:
        """0-based line of the case in its file."""
        return self.loaded.case_lines[self.index]

    @property
    def dataset(self) -> str:
        name = self.loaded.path.name
        for suffix in (".eval.yaml", ".eval.yml", ".yaml", ".yml"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        return self.loaded.suite.dataset or name

    @property
    def target_name(self) -> str | None:
        case, suite = self.case, self.loaded.suite
        return (
            (case.execution.target if case.execution else None)
            or (suite.execution.target if suite.execution else None)
            or suite.target
        )


@dataclass
class CaseResult:
    status: Status
    eval_id: str
    dataset: str
    file: str
    line: int
    conversation_id: str | None = None
    target: str | None = None
    candidate: str = ""
    evaluation: CaseEvaluation | None = None
    error: str | None = None
    trace_summary: dict[str, Any] | None = None
    usage: Usage = field(default_factory=Usage)
    timestamp: str = field(
        default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds")
    )

    def to_dict(self) -> dict[str, Any]:
        """Plain builtins, redacted: what reports, JUnit XML and results files are made of."""
        score = self.evaluation.score if self.evaluation else None
        results = (
            [r.to_dict() for r in self.evaluation.evaluator_results] if self.evaluation else []
        )
        data: dict[str, Any] = {
            "status": self.status,
            "timestamp": self.timestamp,
            "eval_id": self.eval_id,
            "dataset": self.dataset,
            "conversation_id": self.conversation_id,
            "file": self.file,
            "line": self.line,
            "target": self.target,
            "score": score.score if score else 0.0,
            "verdict": score.verdict if score else None,
            "hits": list(score.hits) if score else [],
            "misses": list(score.misses)
            if score
            else ([f"Error: {self.error}"] if self.error else []),
            "reasoning": score.reasoning if score else None,
            "candidate_answer": self.candidate,
            "evaluator_results": results,
            "error": self.error,
            "trace_summary": self.trace_summary,
            "usage": self.usage.to_dict(),
        }
        return redact_obj(data)  # type: ignore[no-any-return]


def _segment_text(
    spec: CaseSpec, rootdir: Path, message: Message, loc: tuple[int | str, ...], files: list[str]
) -> str:
    parts: list[str] = []
    folder = spec.loaded.path.parent
    for s_index, segment in enumerate(message.content):
        if segment.type == "file":
            seg_loc = (*loc, "content", s_index, "value")
            try:
                path = resolve_reference(segment.value, start=folder, rootdir=rootdir)
                text = read_reference(path, segment.value)
            except ConfigError as exc:
                line, col = spec.loaded.position(seg_loc, spec.index)
                dotted = ".".join(map(str, seg_loc))
                raise ConfigError(f"{spec.loaded.display}:{line}:{col}: {dotted}: {exc}") from None
            files.append(str(path))
            parts.append(f'<file path="{segment.value}">\n{text}\n</file>')
        else:
            parts.append(render_content(segment.value))
    return "\n\n".join(parts)


def prepare_case(spec: CaseSpec, rootdir: Path) -> PreparedCase:
    """Read the case's file references (inside the rootdir only) and derive its values."""
    case = spec.case
    files: list[str] = []
    chat: list[dict[str, Any]] = []
    question_parts: list[str] = []
    for m_index, message in enumerate(case.input_messages):
        loc = ("evalcases", spec.index, "input_messages", m_index)
        text = _segment_text(spec, rootdir, message, loc, files)
        chat.append({"role": message.role, "content": text})
        question_parts.extend(render_content(s.value) for s in message.content if s.type != "file")
    expected: list[dict[str, Any]] = []
    for m_index, message in enumerate(case.expected_messages):
        has_files = any(s.type == "file" for s in message.content)
        content: Any = (
            _segment_text(
                spec, rootdir, message, ("evalcases", spec.index, "expected_messages", m_index), []
            )
            if has_files
            else message.authored_content()
        )
        entry: dict[str, Any] = {"role": message.role, "content": content}
        if message.tool_calls:
            entry["tool_calls"] = message.tool_calls
        expected.append(entry)
    reference = ""
    if expected:
        last = expected[-1]
        reference = (
            render_content(last["content"])
            if last["content"] not in ("", [], None)
            else render_content(last.get("tool_calls") or "")
        )
    return PreparedCase(
        id=case.id,
        question="\n\n".join(part for part in question_parts if part),
        input_messages=tuple(chat),
        expected_outcome=case.expected_outcome,
        reference_answer=reference,
        expected_messages=tuple(expected),
        authored_input=tuple(
            {
                **m.model_dump(exclude_none=True, exclude={"content"}),
                "content": m.authored_content(),
            }
            for m in case.input_messages
        ),
        input_files=tuple(files),
        conversation_id=case.conversation_id,
        dataset=spec.dataset,
        folder=spec.loaded.path.parent,
        rootdir=rootdir,
    )


class AgentvRun:
    """Run-wide state, one per pytest process (each xdist worker has its own)."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.rootdir = config.rootpath
        refresh_secrets()
        self.scheduler = Scheduler(settings.concurrency)
        self.store = (
            ReplayStore(
                settings.cache_dir,
                settings.cache_mode,
                display_path(settings.cache_dir, config.rootpath),
            )
            if settings.cache_mode != "off"
            else None
        )
        self.policy = RetryPolicy(
            retries=settings.judge_retries,
            deadline=settings.judge_timeout,
            attempt_timeout=settings.judge_attempt_timeout,
            backoff=settings.judge_backoff,
        )
        self._targets: dict[Path, LoadedTargets | None] = {}
        self._target_paths: dict[Path, Path | None] = {}
        self._built_targets: dict[tuple[str, Path], Target] = {}
        self._clients: dict[ModelSpec, LlmClient] = {}
        self._lock = threading.Lock()
        self._builtins: dict[str, Evaluator] = {
            "llm_judge": LlmJudgeEvaluator(
                resolve_judge_provider=self.resolve_judge,
                prompt_timeout=settings.code_judge_timeout,
            ),
            "code_judge": CodeEvaluator(
                default_timeout=settings.code_judge_timeout,
                env_passthrough=settings.code_judge_env,
            ),
        }

    def builtin_evaluator(self, kind: str) -> Evaluator | None:
        return self._builtins.get(canonical_kind(kind))

    def evaluator_lookup(self, hook: Any) -> Callable[[str], Evaluator | None]:
        """Find evaluators by kind through a (path-sensitive) hook caller, asking once per kind."""
        found: dict[str, Evaluator | None] = {}

        def lookup(kind: str) -> Evaluator | None:
            if kind not in found:
                found[kind] = hook.pytest_agentv_make_evaluator(config=self.config, kind=kind)
            return found[kind]

        return lookup

    def registry_for(self, kinds: Sequence[str], hook: Any) -> dict[str, Evaluator]:
        lookup = self.evaluator_lookup(hook)
        registry: dict[str, Evaluator] = {}
        for kind in kinds:
            evaluator = lookup(kind)
            if evaluator is None:
                raise ConfigError(
                    f"unknown evaluator type '{kind}'; add kinds with the "
                    "pytest_agentv_make_evaluator hook"
                )
            registry[kind] = evaluator
        return registry

    def plan(self, items: Sequence[pytest.Item]) -> None:
        """Let the scheduler start these items' cases early, unless a fixture answers them
        (its value is only known at item setup)."""
        from .collect import EvalItem

        self.scheduler.plan(
            [
                (item.nodeid, partial(self.run_case, item.spec))
                for item in items
                if isinstance(item, EvalItem) and "agentv_target" not in item.fixturenames
            ]
        )

    # -- models ---------------------------------------------------------------------------
    def client(self, spec: ModelSpec) -> LlmClient:
        with self._lock:
            client = self._clients.get(spec)
            if client is None:
                client = LlmClient(
                    spec,
                    self.policy,
                    self.store,
                    on_rate_limit=self.scheduler.limit.on_rate_limit,
                    on_success=self.scheduler.limit.on_success,
                )
                self._clients[spec] = client
            return client

    def session_judge(self) -> LlmClient | None:
        if not self.settings.judge_model:
            return None
        return self.client(
            ModelSpec(model=self.settings.judge_model, api_base=self.settings.judge_api_base)
        )

    def resolve_judge(self, context: EvaluationContext) -> LlmClient | None:
        """Evaluator ``model:`` > the target's ``judge_target`` > the session's judge model."""
        entry = context.evaluator
        if entry is not None and entry.model:
            # Another model is called at its provider's endpoint unless the entry names one:
            # the session's API base (and the key sent with it) belongs to the session's model.
            base = entry.options.get("api_base")
            return self.client(ModelSpec(model=entry.model, api_base=str(base) if base else None))
        if context.judge_model:
            return self.client(ModelSpec(model=context.judge_model))
        if context.judge_target:
            return self._judge_target(context.judge_target, context.eval_case.folder)
        return self.session_judge()

    def _judge_target(self, name: str, folder: Path) -> LlmClient:
        loaded = self.targets_file(folder)
        target = next((t for t in loaded.model.targets if t.name == name), None) if loaded else None
        if loaded is None or target is None:
            raise ConfigError(f"judge_target '{name}' is not defined in a targets file")
        provider = target.provider.lower()
        if provider not in LLM_PROVIDERS:
            raise ConfigError(
                f"{loaded.where(target)}: judge_target '{name}' must be an LLM target "
                f"({', '.join(sorted(LLM_PROVIDERS))}), not '{target.provider}'"
            )
        return self.client(
            model_spec(provider, interpolate(target, loaded), f"judge_target '{name}'")
        )

    # -- targets --------------------------------------------------------------------------
    def _targets_path(self, folder: Path) -> Path | None:
        if self.settings.targets is not None:
            return self.settings.targets
        if folder not in self._target_paths:
            self._target_paths[folder] = next(
                (
                    root / name
                    for root in search_roots(folder, self.rootdir)
                    for name in TARGETS_FILE_NAMES
                    if (root / name).is_file()
                ),
                None,
            )
        return self._target_paths[folder]

    def targets_file(self, folder: Path) -> LoadedTargets | None:
        path = self._targets_path(folder)
        if path is None:
            return None
        with self._lock:
            if path not in self._targets:
                self._targets[path] = load_targets_file(path, display_path(path, self.rootdir))
            return self._targets[path]

    def target_for(self, spec: CaseSpec) -> Target:
        """``--agentv-target`` > case ``execution.target`` > file target > ``default``."""
        name = self.settings.target or spec.target_name or "default"
        folder = spec.loaded.path.parent
        built = self._built_targets.get((name, folder))
        if built is None:
            built = self._built_targets[(name, folder)] = self._build_target(spec, name, folder)
        return built

    def _build_target(self, spec: CaseSpec, name: str, folder: Path) -> Target:
        loaded = self.targets_file(folder)
        if loaded is None:
            raise ConfigError(
                f"no target for case '{spec.case.id}': define an 'agentv_target' fixture in a "
                f"conftest.py, or a target named '{name}' in .agentv/targets.yaml"
            )
        target = next((t for t in loaded.model.targets if t.name == name), None)
        if target is None:
            known = ", ".join(t.name for t in loaded.model.targets) or "none"
            raise ConfigError(
                f"target '{name}' is not defined in {loaded.display} (known: {known})"
            )
        return build_target(
            target, loaded, folder=folder, rootdir=self.rootdir, llm_client=self.client
        )

    # -- cases ----------------------------------------------------------------------------
    def _result(self, spec: CaseSpec, status: Status, **values: Any) -> CaseResult:
        return CaseResult(
            status=status,
            eval_id=spec.case.id,
            dataset=spec.dataset,
            file=spec.loaded.display,
            line=spec.line + 1,
            conversation_id=spec.case.conversation_id,
            **values,
        )

    def _context(
        self,
        spec: CaseSpec,
        prepared: PreparedCase,
        target: Target | None,
        response: TargetResponse | None,
    ) -> EvaluationContext:
        return EvaluationContext(
            eval_case=prepared,
            candidate=response.text if response else "",
            target=target.name if target else "",
            output_messages=response.output_messages if response else None,
            judge_target=target.judge_target if target else None,
            trace_summary=response.trace_summary() if response else None,
        )

    def check_judges(self, spec: CaseSpec, context: EvaluationContext) -> None:
        """Raise ``JudgeNotConfiguredError`` before any work if a needed LLM judge is absent."""
        for entry in spec.evaluators:
            evaluator = lookup_evaluator(spec.registry, entry.type)
            if isinstance(evaluator, LlmJudgeEvaluator):
                evaluator.judge_for(replace(context, evaluator=entry))

    def begin(self, spec: CaseSpec, fixture: FixtureTarget | None) -> tuple[PreparedCase, Target]:
        """The synchronous part of a case: files, target and judge checks (raises AgentvError)."""
        prepared = prepare_case(spec, self.rootdir)
        target: Target = fixture if fixture is not None else self.target_for(spec)
        self.check_judges(spec, self._context(spec, prepared, target, None))
        return prepared, target

    def _failure(
        self,
        spec: CaseSpec,
        exc: Exception,
        target: Target | None,
        usage: Usage,
        response: TargetResponse | None = None,
    ) -> CaseResult:
        if isinstance(exc, JudgeNotConfiguredError):
            return self._result(spec, "skipped", error=str(exc), target=_name(target), usage=usage)
        message = (
            str(exc)
            if isinstance(exc, AgentvError)
            else f"unexpected {type(exc).__name__} while running the case: {exc}"
        )
        return self._result(
            spec,
            "error",
            error=redact(message),
            target=_name(target),
            usage=usage,
            candidate=response.text if response else "",
        )

    async def run_case(
        self,
        spec: CaseSpec,
        fixture: FixtureTarget | None = None,
        begun: tuple[PreparedCase, TargetResponse] | None = None,
    ) -> CaseResult:
        """Run the case to a ``CaseResult``; ``begun`` is given when a sync fixture answered."""
        usage = Usage()
        token = current_usage.set(usage)
        target: Target | None = fixture
        response: TargetResponse | None = None
        try:
            if begun is not None:
                prepared, response = begun
            else:
                prepared, target = self.begin(spec, fixture)
                response = await target.invoke(prepared, 0)
            context = self._context(spec, prepared, target, response)
            evaluation = await run_evaluators_for_case(context, spec.evaluators, spec.registry)
        except Exception as exc:
            return self._failure(spec, exc, target, usage, response)
        finally:
            current_usage.reset(token)
        status: Status = "error" if evaluation.score.error else "graded"
        return self._result(
            spec,
            status,
            target=_name(target),
            candidate=response.text,
            evaluation=evaluation,
            error=evaluation.score.error,
            trace_summary=context.trace_summary,
            usage=usage,
        )

    def run_now(self, spec: CaseSpec, fixture: FixtureTarget | None) -> CaseResult:
        """Run a case at item time, from pytest's thread (sync fixtures are called right here)."""
        if fixture is not None and not fixture.is_async:
            try:
                prepared, _ = self.begin(spec, fixture)
                response = fixture.call_sync(prepared)
            except Exception as exc:
                return self._failure(spec, exc, fixture, Usage())
            return self.scheduler.run(self.run_case(spec, fixture, begun=(prepared, response)))
        return self.scheduler.run(self.run_case(spec, fixture))

    def close(self) -> None:
        self.scheduler.close()


def get_run(config: pytest.Config) -> AgentvRun:
    """The run of this pytest process, created on first use (eval files, ``assert_judged``)."""
    run = config.stash.get(run_key, None)
    if run is None:
        run = config.stash[run_key] = AgentvRun(config, config.stash[settings_key])
    return run


def _name(target: Target | None) -> str | None:
    return target.name if target is not None else None
