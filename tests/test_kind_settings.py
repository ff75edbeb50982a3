"""Settings of tool_trajectory, field_accuracy, latency, cost, token_usage and composite are
checked when the eval file loads: one ``path:line:col: field: problem`` error, or a warning for
a key nobody reads."""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path

import pytest

from tests.helpers import load_error, write

HEAD = "evalcases:\n  - id: a\n    input: q\n    evaluators:\n"
BIG = "9" * 400


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            "      - {name: t, type: tool_trajectory, mode: sorted}\n",
            "bad.eval.yaml:5:48: evalcases.0.evaluators.0.mode: unknown mode 'sorted': use "
            "any_order, in_order, exact, superset or subset",
        ),
        (
            "      - {name: t, type: tool_trajectory, mode: any_order}\n",
            "bad.eval.yaml:5:9: evalcases.0.evaluators.0: mode any_order needs 'minimums'*",
        ),
        (
            "      - {name: t, type: tool_trajectory, mode: exact}\n",
            "bad.eval.yaml:5:9: evalcases.0.evaluators.0: mode exact needs 'expected'*",
        ),
        (
            "      - name: t\n        type: tool_trajectory\n        mode: any_order\n"
            "        minimums: {search: -1}\n",
            "bad.eval.yaml:8:19: evalcases.0.evaluators.0.minimums: minimum for 'search' must be "
            "a finite number >= 0 (got -1)",
        ),
        (
            "      - name: t\n        type: tool_trajectory\n        mode: in_order\n"
            "        expected:\n          - {tool: read, max_duration_ms: -5}\n",
            "bad.eval.yaml:9:43: evalcases.0.evaluators.0.expected.0.max_duration_ms: "
            "max_duration_ms must be a finite number >= 0 (got -5)",
        ),
        (
            "      - name: t\n        type: tool_trajectory\n        mode: in_order\n"
            "        expected:\n          - {tool: read, args: everything}\n",
            "*evalcases.0.evaluators.0.expected.0.args: args must be 'any' or a mapping*",
        ),
        (
            "      - name: t\n        type: tool_trajectory\n        mode: in_order\n"
            "        expected:\n          - {args: any}\n",
            "*evalcases.0.evaluators.0.expected.0.tool: required field is missing",
        ),
        (
            "      - {name: f, type: field_accuracy, fields: []}\n",
            "*evalcases.0.evaluators.0.fields: must not be empty*",
        ),
        (
            "      - {name: f, type: field_accuracy, fields: [{path: a, match: fuzzy}]}\n",
            "*evalcases.0.evaluators.0.fields.0.match: unknown match 'fuzzy': use exact, "
            "numeric_tolerance or date; for fuzzy matching use a code_judge evaluator",
        ),
        (
            "      - {name: f, type: field_accuracy, fields: [{path: a, match: exact}], "
            "aggregation: mean}\n",
            "*evalcases.0.evaluators.0.aggregation: unknown aggregation 'mean'*",
        ),
        (
            "      - name: f\n        type: field_accuracy\n"
            "        fields: [{path: a, match: numeric_tolerance, tolerance: -1}]\n",
            "*evalcases.0.evaluators.0.fields.0.tolerance: tolerance must be a finite number >= 0*",
        ),
        (
            "      - {name: l, type: latency, threshold: -1}\n",
            "bad.eval.yaml:5:45: evalcases.0.evaluators.0.threshold: threshold (milliseconds) "
            "must be a finite number >= 0 (got -1)",
        ),
        (
            "      - {name: l, type: latency}\n",
            "*evalcases.0.evaluators.0.threshold: required field is missing",
        ),
        (
            "      - {name: c, type: cost, budget: cheap}\n",
            "*evalcases.0.evaluators.0.budget: budget (USD) must be a finite number >= 0 "
            "(got 'cheap')",
        ),
        (
            "      - {name: k, type: token_usage}\n",
            "*evalcases.0.evaluators.0: token_usage needs at least one of max_total, max_input, "
            "max_output",
        ),
        (
            "      - {name: k, type: token_usage, max_total: -3}\n",
            "*evalcases.0.evaluators.0.max_total: max_total must be a finite number >= 0 (got -3)",
        ),
        (
            "      - name: c\n        type: composite\n        evaluators:\n"
            "          - {name: fast, type: latency, threshold: 5}\n"
            "        aggregator: {type: weighted_average, weights: {fats: 2}}\n",
            "bad.eval.yaml:9:62: evalcases.0.evaluators.0.aggregator.weights.fats: weights name "
            "'fats', which is not a member of this composite (did you mean 'fast'?); "
            "members: fast",
        ),
        (
            "      - name: c\n        type: composite\n        evaluators:\n"
            "          - {name: fast, type: latency, threshold: 5}\n",
            "*evalcases.0.evaluators.0.aggregator: required field is missing",
        ),
        (
            "      - name: c\n        type: composite\n        evaluators:\n"
            "          - {name: fast, type: latency, threshold: 5}\n"
            "        aggregator: {type: vote}\n",
            "*evalcases.0.evaluators.0.aggregator.type: unknown aggregator type 'vote': use "
            "weighted_average, code_judge, llm_judge or threshold",
        ),
        (
            "      - name: c\n        type: composite\n        evaluators:\n"
            "          - {name: fast, type: latency, threshold: 5}\n"
            "        aggregator: {type: code_judge}\n",
            "*evalcases.0.evaluators.0.aggregator: a code_judge aggregator needs a 'path'*",
        ),
        (
            "      - name: c\n        type: composite\n        evaluators: []\n"
            "        aggregator: {type: weighted_average}\n",
            "*evalcases.0.evaluators.0.evaluators: must not be empty*",
        ),
        (
            "      - name: c\n        type: composite\n        evaluators:\n"
            "          - {name: x, type: latency, threshold: 5}\n"
            "          - {name: x, type: cost, budget: 1}\n"
            "        aggregator: {type: weighted_average}\n",
            "*evalcases.0.evaluators.0.evaluators: evaluator name 'x' is used twice*",
        ),
        (
            "      - name: outer\n        type: composite\n"
            "        aggregator: {type: weighted_average}\n"
            "        evaluators:\n          - name: inner\n            type: composite\n"
            "            aggregator: {type: weighted_average}\n"
            "            evaluators: [{name: slow, type: latency, threshold: -2}]\n",
            "bad.eval.yaml:12:65: evalcases.0.evaluators.0.evaluators.0.evaluators.0.threshold: "
            "threshold (milliseconds) must be a finite number >= 0 (got -2)",
        ),
        (
            "      - name: c\n        type: composite\n"
            "        aggregator: {type: weighted_average}\n"
            "        evaluators: [{name: m, type: latnecy, threshold: 5}]\n",
            "bad.eval.yaml:8:38: evalcases.0.evaluators.0.evaluators.0.type: unknown evaluator "
            "type 'latnecy' (did you mean 'latency'?)*",
        ),
        (
            "      - name: c\n        type: composite\n"
            "        aggregator: {type: llm_judge, prompt: prompts/missing.md}\n"
            "        evaluators: [{name: m, type: latency, threshold: 5}]\n",
            "bad.eval.yaml:7:47: evalcases.0.evaluators.0.aggregator.prompt: prompt file "
            "'prompts/missing.md' not found*",
        ),
        (
            f"      - {{name: l, type: latency, threshold: {BIG}}}\n",
            "*evalcases.0.evaluators.0.threshold: threshold (milliseconds) must be a finite "
            "number >= 0 (got 9999999999999999999999999999999999999...)",
        ),
        (
            f"      - {{name: l, type: latency, threshold: 5, weight: {BIG}}}\n",
            "*evalcases.0.evaluators.0.weight: *",
        ),
        (
            "      - name: t\n        type: tool_trajectory\n        mode: any_order\n"
            f"        minimums: {{search: {BIG}}}\n",
            "*evalcases.0.evaluators.0.minimums: minimum for 'search' must be a finite number*",
        ),
        (
            "      - name: f\n        type: field_accuracy\n"
            f"        fields: [{{path: a, match: numeric_tolerance, tolerance: {BIG}}}]\n",
            "*evalcases.0.evaluators.0.fields.0.tolerance: tolerance must be a finite number*",
        ),
    ],
    ids=[
        "unknown-mode",
        "any-order-without-minimums",
        "exact-without-expected",
        "negative-minimum",
        "negative-max-duration",
        "bad-args",
        "step-without-tool",
        "no-fields",
        "unknown-match",
        "unknown-aggregation",
        "negative-tolerance",
        "negative-threshold",
        "no-threshold",
        "non-numeric-budget",
        "no-token-limit",
        "negative-token-limit",
        "weight-names-no-member",
        "no-aggregator",
        "unknown-aggregator",
        "code-aggregator-without-path",
        "no-members",
        "duplicate-members",
        "nested-member-setting",
        "unknown-member-kind",
        "missing-aggregator-prompt",
        # An integer too large for a float raised OverflowError out of the loader (a traceback).
        "huge-threshold",
        "huge-weight",
        "huge-minimum",
        "huge-tolerance",
    ],
)
def test_invalid_settings_are_one_clear_collection_error(
    tmp_path: Path, entry: str, expected: str
) -> None:
    error = load_error(tmp_path, "bad.eval.yaml", HEAD + entry)
    assert fnmatch(error, f"*{expected}"), error


@pytest.mark.parametrize("kind", ["tool_trajectory", "latency", "composite"])
def test_kinds_with_settings_cannot_be_the_default_kind(
    pytester: pytest.Pytester, kind: str
) -> None:
    write(pytester, "bad.eval.yaml", f"evaluator: {kind}\nevalcases: [{{id: a, input: q}}]\n")
    result = pytester.runpytest("--co", "-q")
    result.stdout.fnmatch_lines(
        [f"*bad.eval.yaml:1:12: evaluator: '{kind}' as the default kind needs its settings*"]
    )


def test_unknown_setting_keys_warn(pytester: pytest.Pytester) -> None:
    write(
        pytester,
        "w.eval.yaml",
        """
        evalcases:
          - id: a
            input: q
            evaluators:
              - name: t
                type: tool_trajectory
                mode: in_order
                expected:
                  - {tool: search, argz: {q: laptops}}
                minimum: {search: 1}
        """,
    )
    write(pytester, ".agentv/targets.yaml", "targets: [{name: default, provider: mock}]\n")
    result = pytester.runpytest("--co", "-q", "-W", "default")
    result.stdout.fnmatch_lines(
        [
            "*w.eval.yaml:11: evalcases.0.evaluators.0.minimum: unknown key 'minimum' is ignored "
            "(did you mean 'minimums'?)",
            "*w.eval.yaml:10: evalcases.0.evaluators.0.expected.0.argz: unknown key 'argz' is "
            "ignored*",
        ]
    )


def test_code_judge_keeps_every_unknown_key_as_config(pytester: pytest.Pytester) -> None:
    """The new kinds' setting names mean nothing special to a code judge."""
    write(
        pytester,
        "echo.py",
        "import json, sys\nconfig = json.load(sys.stdin)['config']\n"
        "print(json.dumps({'score': 1, 'hits': sorted(config)}))\n",
    )
    write(
        pytester,
        "c.eval.yaml",
        """
        evalcases:
          - id: a
            input: q
            evaluators:
              - {name: j, type: code_judge, script: [python, echo.py], mode: x, threshold: -1,
                 evaluators: [], fields: 3}
        """,
    )
    write(pytester, ".agentv/targets.yaml", "targets: [{name: default, provider: mock}]\n")
    result = pytester.runpytest("--agentv-results=out.jsonl")
    result.assert_outcomes(passed=1)
    assert (
        '"hits":["evaluators","fields","mode","threshold"]'
        in (pytester.path / "out.jsonl").read_text()
    )
