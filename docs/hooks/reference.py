"""MkDocs hook: the reference pages, generated from the code at every build.

Nothing generated here is committed, so it cannot go stale: the options come from
``pytest_agentv.options.OPTIONS``, the JSON Schemas from ``python -m pytest_agentv schema``, the
hooks from the ``pytest_agentv_*`` functions of ``pytest_agentv.hookspecs``, and the evaluator
kinds from ``pytest_agentv.EVALUATOR_KINDS`` (their aliases from the table of AgentV names).
Options, kinds and hooks added later appear on their own; anything the generator expects and
does not find fails the build with a ``PluginError`` that says what is missing.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

from pytest_agentv.evaluators.textchecks import CHECKS

#: Generated page -> the function that writes it. The nav in mkdocs.yml names these paths.
PAGES: dict[str, Callable[[], str]] = {}

#: What an option does when it is not set, where its default (None) says too little. A key
#: that is no longer an option fails the build.
UNSET = {
    "target": "each case's own target (`execution.target`, else `default`)",
    "targets": "the nearest `.agentv/targets.yaml` or `targets.yaml`",
    "results": "no results file",
    "judge_model": "no judge: LLM-judged cases are skipped",
    "judge_api_base": "the provider's usual endpoint",
    "cache_dir": "`.agentv/cache` at the rootdir",
    "trials": "each case's own `execution.trials`",
    "answers": "call the targets",
    "baseline": "no comparison",
    "max_regression": "regressions are reported, not failed",
    "budget_usd": "no budget",
    "calibration": "`.agentv/calibration.yaml` at the rootdir, when present",
}

#: Where each option is explained. A key that is no longer an option fails the build; an
#: option without an entry is listed all the same.
SEE = {
    "target": "targets.md",
    "targets": "targets.md",
    "borderline": "index.md#outcomes",
    "results": "ci.md#the-results-file",
    "eval_patterns": "eval-files.md",
    "code_judge_timeout": "evaluators.md#code-judges",
    "code_judge_env": "evaluators.md#code-judges",
    "judge_model": "llm-judges.md",
    "judge_api_base": "llm-judges.md",
    "judge_transport": "llm-judges.md#how-models-are-called",
    "judge_timeout": "llm-judges.md#how-the-judge-is-called",
    "judge_attempt_timeout": "llm-judges.md#how-the-judge-is-called",
    "judge_retries": "llm-judges.md#how-the-judge-is-called",
    "judge_backoff": "llm-judges.md#how-the-judge-is-called",
    "target_timeout": "targets.md#when-a-target-fails",
    "require_judge": "ci.md#skips-and-errors",
    "cache_mode": "record-replay.md",
    "cache_dir": "record-replay.md",
    "concurrency": "xdist.md",
    "fail_on_error": "ci.md#skips-and-errors",
    "trials": "trials.md",
    "answers": "targets.md#re-grade-recorded-answers",
    "baseline": "ci.md#regression-gate",
    "max_regression": "ci.md#regression-gate",
    "budget_usd": "ci.md#budget",
    "estimate": "ci.md#estimate",
    "calibration": "calibration.md",
    "calibration_mode": "calibration.md",
}

#: One line per built-in evaluator kind and the page that explains it. A key that is no longer
#: a kind fails the build; a kind without an entry is listed all the same.
KINDS = {
    "llm_judge": ("An LLM judge: freeform, checklist or score-range rubrics", "llm-judges.md"),
    "code_judge": ("Any script that reads JSON on stdin and prints a score", "evaluators.md"),
    "tool_trajectory": (
        "Which tools the agent called, in what order, with which arguments",
        "evaluators.md#tool_trajectory",
    ),
    "field_accuracy": (
        "The fields of a JSON answer against the expected ones",
        "evaluators.md#field_accuracy",
    ),
    "latency": (
        "The answer's duration against a threshold",
        "evaluators.md#latency-cost-token_usage",
    ),
    "cost": ("The answer's cost against a budget", "evaluators.md#latency-cost-token_usage"),
    "token_usage": ("The answer's tokens against limits", "evaluators.md#latency-cost-token_usage"),
    "composite": ("Evaluators made of evaluators, with an aggregator", "evaluators.md#composite"),
    **{
        kind: ("A deterministic check of the answer text", "evaluators.md#deterministic-checks")
        for kind in CHECKS
    },
    "execution_metrics": (
        "Tool calls, model calls, tokens, cost, duration and exploration against limits",
        "evaluators.md#execution-metrics-skill-trigger",
    ),
    "skill_trigger": (
        "Whether the agent used a skill (or did not)",
        "evaluators.md#execution-metrics-skill-trigger",
    ),
}


def page(path: str) -> Callable[[Callable[[], str]], Callable[[], str]]:
    def register(function: Callable[[], str]) -> Callable[[], str]:
        PAGES[path] = function
        return function

    return register


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for path, write in PAGES.items():
        if files.get_file_from_path(path) is not None:
            raise PluginError(f"docs/{path} is generated by docs/hooks/reference.py: delete it")
        try:
            content = write()
        except PluginError:
            raise
        except Exception as exc:  # a rename in the package: say which page and why
            raise PluginError(f"cannot generate {path}: {type(exc).__name__}: {exc}") from exc
        files.append(File.generated(config, path, content=content))
    return files


# --- helpers ---------------------------------------------------------------------------------


def cell(text: object) -> str:
    """Text for a Markdown table cell: one line, pipes escaped outside code spans (inside them
    a pipe does not end the cell, and an escape would be shown)."""
    parts = " ".join(str(text).split()).split("`")
    return "`".join(p if i % 2 else p.replace("|", "\\|") for i, p in enumerate(parts))


def code(text: object) -> str:
    return f"`{text}`"


def expect(condition: object, problem: str) -> None:
    if not condition:
        raise PluginError(f"docs reference: {problem}")


def stale(table: dict[str, Any], known: Iterable[str], what: str) -> None:
    gone = sorted(set(table) - set(known))
    expect(not gone, f"docs/hooks/reference.py describes {what} that no longer exist: {gone}")


def table(header: list[str], rows: Iterable[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def run_module(*args: str, cwd: str | None = None) -> str:
    result = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )
    expect(
        result.returncode == 0,
        f"`python {' '.join(args)}` exited with {result.returncode}:\n{result.stderr[-2000:]}",
    )
    return result.stdout


# --- options ---------------------------------------------------------------------------------


def default_text(option: Any) -> str:
    value = option.default
    if value is None:
        return UNSET.get(option.name, "not set")
    if isinstance(value, bool):
        return code("yes" if value else "no")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (tuple, list)):
        return code(",".join(map(str, value))) if value else "none"
    return code(value)


def flag_text(option: Any) -> str:
    if option.kind == "bool":
        return code(f"{option.flag} [yes|no]")
    metavar = option.metavar or "|".join(option.choices)
    return code(f"{option.flag} {metavar}" if metavar else option.flag)


@page("reference/options.md")
def options_page() -> str:
    from pytest_agentv.options import OPTIONS

    expect(len(OPTIONS) > 0, "pytest_agentv.options.OPTIONS is empty")
    names = [option.name for option in OPTIONS]
    stale(UNSET, names, "options (UNSET)")
    stale(SEE, names, "options (SEE)")
    rows = []
    for option in OPTIONS:
        for attribute in ("flag", "ini", "env", "help", "kind", "choices"):
            expect(hasattr(option, attribute), f"an Option has no {attribute!r}: {option!r}")
        expect(option.help, f"{option.flag} has no help text")
        help_text = cell(option.help)
        if option.name in SEE:
            help_text += f" ([more]({'../' + SEE[option.name]}))"
        choices = ", ".join(code(c) for c in option.choices) or (
            "`yes`, `no`" if option.kind == "bool" else ""
        )
        rows.append(
            [
                cell(flag_text(option)),
                code(option.ini),
                code(option.env),
                cell(default_text(option)),
                cell(choices),
                help_text,
            ]
        )
    return (
        "# Options\n\n"
        "Generated from the plugin's option table at every build of these docs.\n\n"
        "Every option has three spellings: the command line (`--agentv-...`), the ini file "
        "(`agentv_...`, in `pytest.ini`, `tox.ini`, `setup.cfg` or `[tool.pytest.ini_options]` "
        "of `pyproject.toml`) and the environment (`AGENTV_...`). The command line wins over "
        "ini, ini over the environment. Yes/no options accept `yes`, `no`, `true`, `false`, "
        "`on`, `off`, `1`, `0`; on the command line, `--agentv-require-judge` alone means yes "
        "(put test paths before such an option, or write `--agentv-estimate=yes`). Relative "
        "paths are read from the current folder (the ini file's folder for ini values).\n\n"
        + table(["command line", "ini", "environment", "default", "choices", "help"], rows)
        + '\nEval items carry the `agentv` marker (`-m agentv`, `-m "not agentv"`); `-k`, '
        "`--co`, `--lf`, fixtures and pytest-xdist work as for any test. `-p no:agentv` "
        "disables the plugin.\n"
    )


# --- JSON Schemas ----------------------------------------------------------------------------


def schema(kind: str) -> dict[str, Any]:
    text = run_module("-m", "pytest_agentv", "schema", kind)
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise PluginError(
            f"`python -m pytest_agentv schema {kind}` printed no JSON: {exc}"
        ) from exc
    expect(isinstance(value, dict), f"the {kind} schema is not a JSON object")
    return value


def type_text(spec: dict[str, Any]) -> str:
    """A short, readable type of one schema property."""
    if "$ref" in spec:
        return spec["$ref"].rsplit("/", 1)[-1]
    if "const" in spec:
        return json.dumps(spec["const"])
    if "enum" in spec:
        return " | ".join(json.dumps(v) for v in spec["enum"])
    for key in ("anyOf", "oneOf"):
        if key in spec:
            parts = [type_text(s) for s in spec[key] if s.get("type") != "null"]
            return " or ".join(dict.fromkeys(parts)) or "null"
    kind = spec.get("type")
    if kind == "array":
        return f"list of {type_text(spec.get('items', {}))}"
    if kind == "object" and "additionalProperties" in spec and "properties" not in spec:
        return "mapping"
    if isinstance(kind, list):
        return " or ".join(kind)
    return kind or "any"


def constraints(spec: dict[str, Any]) -> str:
    notes = []
    for key, word in (
        ("minimum", "≥"),
        ("exclusiveMinimum", ">"),
        ("maximum", "≤"),
        ("exclusiveMaximum", "<"),
        ("minItems", "items ≥"),
        ("minLength", "length ≥"),
    ):
        if key in spec:
            notes.append(f"{word} {spec[key]}")
    for key in ("anyOf", "oneOf"):
        for option in spec.get(key, []):
            if isinstance(option, dict) and option.get("type") != "null":
                notes += [n for n in [constraints(option)] if n]
    if "default" in spec and spec["default"] is not None:
        notes.append(f"default {json.dumps(spec['default'])}")
    return "; ".join(dict.fromkeys(notes))


def properties_table(spec: dict[str, Any]) -> str:
    required = set(spec.get("required", []))
    properties = spec["properties"]
    described = any(value.get("description") for value in properties.values())
    rows = [
        [
            code(name),
            cell(type_text(value)),
            "yes" if name in required else "",
            cell(constraints(value)),
        ]
        + ([cell(value.get("description", "")).replace("``", "`")] if described else [])
        for name, value in properties.items()
    ]
    header = ["key", "type", "required", "limits"] + (["description"] if described else [])
    return table(header, rows)


def schema_page(kind: str, title: str, intro: str) -> str:
    value = schema(kind)
    variants = [value] if "properties" in value else []
    variants += [v for v in value.get("anyOf", []) + value.get("oneOf", []) if "properties" in v]
    expect(variants, f"the {kind} schema has no top-level properties")
    definitions = value.get("$defs", {})
    expect(definitions, f"the {kind} schema has no $defs")
    parts = [f"# {title}\n\n{intro}\n"]
    if value.get("description"):
        parts.append(f"{value['description']}\n")
    for variant in variants:
        named = variant is not value and variant.get("title")
        parts.append(f"## Top level: {variant['title']}\n" if named else "## Top level\n")
        closed = variant.get("additionalProperties") is False
        parts.append(
            ("Other keys are flagged (`additionalProperties: false`).\n\n" if closed else "")
            + properties_table(variant)
        )
    if any(v.get("type") == "array" for v in value.get("anyOf", [])):
        parts.append("The file may also be a bare list of the entries.\n")
    for name, definition in definitions.items():
        if "properties" not in definition:
            continue
        parts.append(f"## {name}\n")
        if definition.get("description"):
            parts.append(cell(definition["description"]).replace("``", "`") + "\n")
        if definition.get("additionalProperties") is True:
            parts.append("Other keys are accepted.\n")
        parts.append(properties_table(definition))
    parts.append(
        "## The whole schema\n\n"
        f"As printed by `python -m pytest_agentv schema {kind}`:\n\n"
        '??? note "JSON Schema"\n\n'
        + textwrap.indent(
            "```json\n" + json.dumps(value, indent=2, ensure_ascii=False) + "\n```", "    "
        )
        + "\n"
    )
    return "\n".join(parts)


EDITORS = (
    "Generated at every build from `python -m pytest_agentv schema {kind}`, which is made "
    "from what pytest-agentv validates files with: every alias and shorthand it accepts is here. "
    "[Eval files](../eval-files.md#json-schema-for-editors) says how to give it to an editor."
)


@page("reference/eval-schema.md")
def eval_schema_page() -> str:
    return schema_page("eval", "Eval file schema", EDITORS.format(kind="eval"))


@page("reference/sidecar-schema.md")
def sidecar_schema_page() -> str:
    return schema_page("sidecar", "JSONL sidecar schema", EDITORS.format(kind="sidecar"))


@page("reference/targets-schema.md")
def targets_schema_page() -> str:
    return schema_page("targets", "Targets file schema", EDITORS.format(kind="targets"))


# --- hooks -----------------------------------------------------------------------------------


def annotation_text(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def signature_text(function: Callable[..., Any]) -> str:
    """``(a: T, b: U) -> R`` with the annotations as written (they are strings here)."""
    signature = inspect.signature(function)
    params = []
    for parameter in signature.parameters.values():
        annotation = parameter.annotation
        text = parameter.name
        if annotation is not inspect.Parameter.empty:
            text += f": {annotation_text(annotation)}"
        params.append(text)
    returned = signature.return_annotation
    arrow = ""
    if returned is not inspect.Signature.empty:
        arrow = f" -> {annotation_text(returned)}"
    return f"({', '.join(params)}){arrow}"


@page("reference/hooks.md")
def hooks_page() -> str:
    from pytest_agentv import hookspecs

    specs = [
        (name, function)
        for name, function in vars(hookspecs).items()
        if name.startswith("pytest_agentv_") and inspect.isfunction(function)
    ]
    expect(specs, "pytest_agentv.hookspecs defines no pytest_agentv_* hook")
    parts = [
        "# Hooks\n\n",
        "Generated from the plugin's hook specifications at every build of these docs. "
        "[Custom evaluator kinds](../evaluators.md#custom-evaluator-kinds) shows one in use.\n\n",
        inspect.cleandoc(hookspecs.__doc__ or "").replace("``", "`") + "\n\n",
    ]
    for name, function in specs:
        doc = inspect.getdoc(function)
        expect(doc, f"the hook {name} has no docstring")
        signature = signature_text(function)
        marker = getattr(function, "pytest_spec", None) or {}
        notes = " (first non-None result wins)" if marker.get("firstresult") else ""
        parts.append(
            f"## `{name}`\n\n```python\ndef {name}{signature}: ...\n```\n\n"
            + (f"*Hook kind:* first result{notes}.\n\n" if notes else "")
            + doc.replace("``", "`")
            + "\n\n"
        )
    return "".join(parts)


# --- evaluator kinds -------------------------------------------------------------------------


def kind_spellings() -> dict[str, str]:
    """Every evaluator ``type`` spelling the loader reads, and the built-in kind it stands for
    (the kinds themselves, and the table of other AgentV versions' names)."""
    from pytest_agentv import EVALUATOR_KINDS
    from pytest_agentv.spellings import KIND_ALIASES

    return {**{kind: kind for kind in EVALUATOR_KINDS}, **KIND_ALIASES}


@page("reference/evaluator-kinds.md")
def kinds_page() -> str:
    from pytest_agentv import EVALUATOR_KINDS

    expect(EVALUATOR_KINDS, "pytest_agentv.EVALUATOR_KINDS is empty")
    stale(KINDS, EVALUATOR_KINDS, "evaluator kinds (KINDS)")
    spellings = kind_spellings()
    for kind in EVALUATOR_KINDS:
        expect(spellings.get(kind) == kind, f"the built-in kind {kind!r} is not answered as itself")
    unexplained = sorted(name for name, kind in spellings.items() if kind not in EVALUATOR_KINDS)
    expect(not unexplained, f"evaluator types answered by no built-in kind: {unexplained}")
    rows = []
    for kind in EVALUATOR_KINDS:
        aliases = sorted(name for name, target in spellings.items() if target == kind != name)
        summary, where = KINDS.get(kind, ("", ""))
        rows.append(
            [
                code(kind),
                ", ".join(code(a) for a in aliases),
                cell(summary) + (f" ([more](../{where}))" if where else ""),
            ]
        )
    return (
        "# Evaluator kinds\n\n"
        "Generated at every build from `pytest_agentv.EVALUATOR_KINDS` and the table of AgentV "
        "names pytest-agentv reads. An evaluator entry's `type` is one of these kinds or an "
        "alias of one (aliases are the legacy and later AgentV spellings), or a kind a plugin or "
        "`conftest.py` adds with the "
        "[`pytest_agentv_make_evaluator`](hooks.md#pytest_agentv_make_evaluator) hook.\n\n"
        + table(["kind", "aliases", "what it grades"], rows)
        + "\nKinds pytest-agentv does not implement (`agent-judge`, `inline-assert`, and AgentV "
        "v5's `llm-rubric`, `script`, `trajectory:*`...) are an error naming the AgentV "
        "version that introduced them, never a silent fallback to the default judge; see "
        "[Eval files](../eval-files.md#later-agentv-names).\n"
    )
