"""One table of field and kind names across AgentV versions, and the two-names rule.

AgentV v2.5.8 (the classic format) and v4 (``tests``, ``criteria``, ``input``, ``assertions``...)
name the same things differently; earlier and later versions add more names. Every name is read
natively: each field's spellings are listed here (the classic name first), the schema's models
take them from this table, and the loader finds a field in a file under whichever spelling the
file used. A field written under two of its spellings is an error at the second (pydantic would
read one and drop the other). Names of versions pytest-agentv does not implement are listed with
the version that brought them, so that a file using one gets an error that names it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import yaml
from pydantic import AliasChoices, BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from .yamlfile import Loc, child_at

#: Keys read as one field, by model and field: the classic (v2.5.8) name first. ``outcome``,
#: ``description`` and ``eval_cases`` are older spellings; ``tests``, ``input``,
#: ``expected_output``, ``criteria``, ``assertions``, ``command`` and rubric ``outcome`` /
#: ``min_score`` are later ones (v2.10 to v4); camelCase keys are AgentV's TypeScript names. An
#: evaluator entry's ``id`` (v4's autoresearch example) names it: AgentV v4.42.4 reads no ``id``
#: and names such an entry by its kind, which loses the name its author gave.
FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "EvalSuite": {
        "evalcases": ("evalcases", "tests", "eval_cases"),
        "assertions": ("assertions", "assert"),
    },
    "EvalCase": {
        "expected_outcome": ("expected_outcome", "outcome", "criteria"),
        "input_messages": ("input_messages", "input"),
        "expected_messages": ("expected_messages", "expected_output"),
        "evaluators": ("evaluators", "assertions", "assert"),
    },
    "Execution": {"evaluators": ("evaluators", "assertions")},
    "TrialsConfig": {"cost_limit_usd": ("cost_limit_usd", "costLimitUsd")},
    "EvaluatorConfig": {
        "name": ("name", "id"),
        "script": ("script", "command"),
        "rubrics": ("rubrics", "criteria"),
    },
    "PromptScript": {"script": ("script", "command")},
    "CompositeSpec": {"evaluators": ("evaluators", "assertions")},
    "AggregatorSpec": {"path": ("path", "script")},
    "TrajectoryStep": {
        "max_duration_ms": ("max_duration_ms", "maxDurationMs"),
        "args_match": ("args_match", "argsMatch"),
    },
    "ToolTrajectorySpec": {"args_match": ("args_match", "argsMatch")},
    "TokenUsageSpec": {
        "max_total": ("max_total", "maxTotal"),
        "max_input": ("max_input", "maxInput"),
        "max_output": ("max_output", "maxOutput"),
    },
    "TargetConfig": {"judge_target": ("judge_target", "grader_target")},
    "HookConfig": {"command": ("command", "script"), "timeout_ms": ("timeout_ms", "timeoutMs")},
    "ExecutionMetricsSpec": {
        name: (name, "".join(w if i == 0 else w.title() for i, w in enumerate(name.split("_"))))
        for name in (
            "max_tool_calls",
            "max_llm_calls",
            "max_tokens",
            "max_cost_usd",
            "max_duration_ms",
            "target_exploration_ratio",
            "exploration_tolerance",
        )
    },
    "RubricItem": {
        "expected_outcome": ("expected_outcome", "description", "outcome"),
        "min_score_fraction": ("min_score",),
    },
    "ScoreRange": {"expected_outcome": ("expected_outcome", "description", "outcome")},
}


def spelled(model: str, name: str) -> AliasChoices:
    """The keys a field is read from, for the field's ``validation_alias``."""
    return AliasChoices(*FIELDS[model][name])


#: Every spelling of a field name that has several (the last model listing it wins).
_BY_NAME: dict[str, tuple[str, ...]] = {
    name: spellings for fields in FIELDS.values() for name, spellings in fields.items()
}


def _spellings(part: int | str) -> tuple[int | str, ...]:
    return (part, *_BY_NAME.get(part, ())) if isinstance(part, str) else (part,)


def key_at(node: yaml.Node, part: int | str) -> yaml.Node | None:
    """The key node of a mapping entry (under any of its spellings), where a warning about the
    key itself should point."""
    if isinstance(node, yaml.MappingNode):
        for spelling in _spellings(part):
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(spelling):
                    found: yaml.Node = key_node
                    return found
    return None


def locate(root: yaml.Node, loc: Loc) -> tuple[yaml.Node, int]:
    """Walk ``loc`` down the node tree, a key under whichever of its spellings the file used;
    return the deepest node found and how many parts matched."""
    node = root
    for matched, part in enumerate(loc):
        found = next(
            (value for spelling in _spellings(part) if (value := child_at(node, spelling))),
            None,
        )
        if found is None:
            return node, matched
        node = found
    return node, len(loc)


#: The kinds of AgentV v4 (v2.10 to v4.42.4) that have no classic (v2.5.8) equivalent, by their
#: snake_case name: the deterministic text checks, ``execution_metrics`` and ``skill_trigger``.
V4_KINDS = (
    "contains",
    "contains_any",
    "contains_all",
    "icontains",
    "icontains_any",
    "icontains_all",
    "starts_with",
    "ends_with",
    "regex",
    "is_json",
    "equals",
    "execution_metrics",
    "skill_trigger",
)

#: Evaluator ``type`` spellings that name a kind by another name: legacy ones, and the
#: kebab-case (v2.19), ``-grader`` (v3.1) and ``rubrics`` (v2.10) names of later AgentV versions.
KIND_ALIASES: dict[str, str] = {
    "code": "code_judge",
    "code-judge": "code_judge",
    "code_grader": "code_judge",
    "code-grader": "code_judge",
    "llm-judge": "llm_judge",
    "llm_grader": "llm_judge",
    "llm-grader": "llm_judge",
    "rubric": "llm_judge",
    "rubrics": "llm_judge",
    "tool-trajectory": "tool_trajectory",
    "field-accuracy": "field_accuracy",
    "token-usage": "token_usage",
    **{kind.replace("_", "-"): kind for kind in V4_KINDS if "_" in kind},
}

#: Evaluator kinds of later AgentV versions that pytest-agentv does not implement, and the
#: version that introduced each: an eval file naming one gets an error saying so, never the
#: default judge.
LATER_KINDS: dict[str, str] = {
    "agent_judge": "v2.10",
    "agent-judge": "v2.19",
    "inline-assert": "v3.1 (TypeScript SDK only)",
    **dict.fromkeys(
        (
            "llm-rubric",
            "agent-rubric",
            "script",
            "assert-set",
            "skill-used",
            "not-skill-used",
            "javascript",
            "python",
            "webhook",
            "similar",
        ),
        "v5 (5.x-next)",
    ),
}


def canonical_kind(kind: str) -> str:
    return KIND_ALIASES.get(kind, kind)


def v4_kind(kind: str) -> str:
    """A kind as AgentV v4.42.4 names it in its result rows (``llm-grader``, ``is-json``)."""
    named = {"llm_judge": "llm-grader", "code_judge": "code-grader"}
    return named.get(kind, kind.replace("_", "-"))


def later_kind_version(kind: str) -> str | None:
    """The AgentV version that introduced a kind pytest-agentv cannot map, if it is one."""
    if kind.startswith(("trajectory:", "not-trajectory:")):
        return "v5 (5.x-next)"
    return LATER_KINDS.get(kind)


#: Rubric-evaluator spellings (``type: rubric`` of v2.5.8, ``type: rubrics`` of v2.10+): both
#: need their criteria list.
RUBRIC_KINDS = ("rubric", "rubrics")

#: Aggregator spellings of later AgentV versions that name a classic aggregator.
AGGREGATOR_ALIASES = {
    name: KIND_ALIASES[name] for name in ("code_grader", "code-grader", "llm_grader", "llm-grader")
}


#: Other spellings AgentV accepts for settings we read.
TARGET_SETTING_ALIASES: dict[str, str] = {
    "commandTemplate": "command_template",
    "command": "command_template",  # AgentV v4's name
    "useTarget": "use_target",
    "timeoutSeconds": "timeout_seconds",
    "filesFormat": "files_format",
    "attachments_format": "files_format",
    "attachmentsFormat": "files_format",
    "providerBatching": "provider_batching",
    "delayMs": "delay_ms",
}

#: Target settings AgentV v2.5.8 reads and pytest-agentv does not: named in a warning, once.
AGENTV_ONLY_TARGET_SETTINGS = frozenset(
    {
        "workers",
        "verbose",
        "cli_verbose",
        "cliVerbose",
        "keep_temp_files",
        "keepTempFiles",
        "keep_output_files",
        "keepOutputFiles",
        "max_retries",
        "maxRetries",
        "retry_initial_delay_ms",
        "retryInitialDelayMs",
        "retry_max_delay_ms",
        "retryMaxDelayMs",
        "retry_backoff_factor",
        "retryBackoffFactor",
        "retry_status_codes",
        "retryStatusCodes",
        "delay_min_ms",
        "delayMinMs",
        "delay_max_ms",
        "delayMaxMs",
        "thinking_budget",
        "executable",
        "args",
        "log_dir",
        "log_format",
        "system_prompt",
        "workspace_template",
        "subagent_root",
        "wait_for_response",
        "tools",
        "thinking",
        "pi_provider",
    }
)

#: The error type of a field written under two of its spellings; the loader points at the key.
SPELLED_TWICE = "spelled_twice"


@functools.cache
def field_spellings(model: type[BaseModel]) -> dict[str, tuple[str, ...]]:
    """The fields a model reads under several keys, by name: their aliases and their name."""
    found: dict[str, tuple[str, ...]] = {}
    for name, info in model.model_fields.items():
        alias = info.validation_alias
        written = [str(c) for c in alias.choices] if isinstance(alias, AliasChoices) else []
        written += [a for a in (alias, info.alias) if isinstance(a, str)]
        spellings = tuple(dict.fromkeys([*written, name]))
        if len(spellings) > 1:
            found[name] = spellings
    return found


def field_groups(model: type[BaseModel]) -> tuple[tuple[str, ...], ...]:
    """Every group of keys a model reads as one field."""
    return tuple(field_spellings(model).values())


def one_spelling(
    value: dict[str, Any], groups: Iterable[tuple[str, ...]], at: tuple[int, ...] = ()
) -> None:
    """Refuse a field given under two spellings (pydantic would read one and drop the other),
    at the second one written."""
    for group in groups:
        written = [key for key in value if key in group]
        if len(written) > 1:
            first, second = written[:2]
            problem = PydanticCustomError(
                SPELLED_TWICE,
                "give either '{first}' or '{second}', not both",
                {"first": first, "second": second},
            )
            raise ValidationError.from_exception_data(
                "spellings", [InitErrorDetails(type=problem, loc=(*at, second), input=value)]
            )


CLASSIC_KINDS = ("llm_judge", "code_judge", "code", "rubric")

LATER_KIND_NAMES = tuple(k for k in KIND_ALIASES if k not in CLASSIC_KINDS)


def generations(data: dict[str, Any]) -> tuple[list[tuple[Loc, str]], list[tuple[Loc, str]]]:
    """Names only AgentV v2.5.8 uses (classic) and names only later versions use, where written.

    ``input``, ``expected_output`` and ``rubrics`` belong to both and count for neither.
    """
    classic: list[tuple[Loc, str]] = []
    later: list[tuple[Loc, str]] = []

    def keys(value: Any, loc: Loc, old: tuple[str, ...], new: tuple[str, ...]) -> None:
        if isinstance(value, dict):
            classic.extend(((*loc, k), k) for k in old if k in value)
            later.extend(((*loc, k), k) for k in new if k in value)

    def evaluators(entries: Any, loc: Loc) -> None:
        for index, entry in enumerate(entries if isinstance(entries, list) else ()):
            if not isinstance(entry, dict):
                continue
            kind = entry.get("type")
            here = (*loc, index, "type")
            if kind in CLASSIC_KINDS:
                classic.append((here, f"type: {kind}"))
            elif kind in LATER_KIND_NAMES:
                later.append((here, f"type: {kind}"))
            keys(entry, (*loc, index), (), ("command", "criteria"))
            rubrics(entry.get("rubrics") or entry.get("criteria"), (*loc, index, "rubrics"))

    def rubrics(items: Any, loc: Loc) -> None:
        for index, item in enumerate(items if isinstance(items, list) else ()):
            keys(item, (*loc, index), ("required_min_score",), ("min_score",))

    keys(data, (), ("evalcases",), ("tests", "eval_cases", "assertions", "assert"))
    execution = data.get("execution")
    keys(execution, ("execution",), ("evaluators",), ("assertions",))
    if isinstance(execution, dict):
        evaluators(execution.get("evaluators", execution.get("assertions")), ("execution",))
    cases = data.get("evalcases", data.get("tests", data.get("eval_cases")))
    for c_index, case in enumerate(cases if isinstance(cases, list) else ()):
        if not isinstance(case, dict):
            continue
        here: Loc = ("evalcases", c_index)
        keys(
            case,
            here,
            ("expected_outcome", "input_messages", "expected_messages", "evaluators"),
            ("criteria", "assertions", "turns"),
        )
        evaluators(case.get("evaluators", case.get("assertions")), (*here, "evaluators"))
        turns = case.get("turns")
        for t_index, turn in enumerate(turns if isinstance(turns, list) else ()):
            if isinstance(turn, dict):
                evaluators(turn.get("assertions"), (*here, "turns", t_index, "assertions"))
        inner = case.get("execution")
        keys(inner, (*here, "execution"), ("evaluators",), ("assertions",))
        if isinstance(inner, dict):
            evaluators(
                inner.get("evaluators", inner.get("assertions")), (*here, "execution", "evaluators")
            )
        rubrics(case.get("rubrics"), (*here, "rubrics"))
    return classic, later
