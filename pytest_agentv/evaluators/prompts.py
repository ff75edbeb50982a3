"""Judge prompts: the user prompt templates and their variables (the system prompts are the
reply contract's, ``contract/``; prompt files are ``promptfiles.py``; untrusted text goes in
the boundary markers of ``fencing.py``). Template substitution is a single pass over the
template, so ``{{...}}`` inside a value is never expanded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from ..answers import ToolCall, tool_calls
from ..schema.rubrics import RubricItem
from .fencing import fence

#: AgentV v2.5.8's template variables, then v4's (``template-variables.ts``).
TEMPLATE_VARIABLES = (
    "question",
    "candidate_answer",
    "reference_answer",
    "expected_outcome",
    "expected_messages",
    "input_messages",
    "output_messages",
    "input",
    "output",
    "expected_output",
    "criteria",
    "metadata",
    "metadata_json",
    "rubrics",
    "rubrics_json",
    "file_changes",
    "tool_calls",
)
REQUIRED_VARIABLES = ("candidate_answer", "expected_messages", "output", "expected_output")

#: The argument ``{{tool_calls}}`` shows for a tool AgentV knows (else its first short string).
_KEY_ARGUMENTS = {
    "Skill": "skill",
    "Read": "file_path",
    "Write": "file_path",
    "Edit": "file_path",
    "Bash": "command",
    "Grep": "pattern",
    "Glob": "pattern",
}


def _cut(text: str, most: int = 120) -> str:
    return text if len(text) <= most else text[:most] + "…"


def tool_call_lines(calls: Sequence[ToolCall]) -> str:
    """``{{tool_calls}}``: one ``- tool: key argument`` line per call (AgentV
    ``formatToolCalls``)."""
    lines = []
    for call in calls:
        args = call.args if isinstance(call.args, dict) else {}
        key = _KEY_ARGUMENTS.get(call.name)
        detail = args.get(key) if key else None
        if not (isinstance(detail, str) and detail):
            detail = next(
                (v for v in args.values() if isinstance(v, str) and 0 < len(v) <= 120), ""
            )
        lines.append(f"- {call.name}: {_cut(detail)}" if detail else f"- {call.name}")
    return "\n".join(lines)


_VARIABLE = re.compile(r"\{\{\s*([a-zA-Z0-9_]+)\s*\}\}")


def uses_required_variable(template: str) -> bool:
    return any(name in REQUIRED_VARIABLES for name in _VARIABLE.findall(template))


def has_variables(template: str) -> bool:
    return any(name in TEMPLATE_VARIABLES for name in _VARIABLE.findall(template))


def substitute(template: str, values: Mapping[str, str]) -> str:
    """Replace ``{{name}}`` with its value in one pass; unknown variables are left as written."""
    return _VARIABLE.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


class TemplateValues(Mapping[str, str]):
    """Template variables (both AgentV generations' names), each made when a prompt first uses
    it: most prompts use a few, and the JSON of a case's messages is the costliest part of
    rendering one. Untrusted ones are fenced, the rest as written in the eval file; ``extra``
    (an aggregator's data, which wins over a name of ours) pretty-printed and fenced. ``memo``
    keeps the texts that do not depend on the nonce between the renderings of one prompt (its
    store key's, its call's)."""

    def __init__(
        self,
        inputs: Mapping[str, Any],
        nonce: str,
        rubrics: Sequence[RubricItem],
        memo: dict[str, str],
        extra: Mapping[str, Any],
    ) -> None:
        self._inputs = inputs
        self._nonce = nonce
        self._rubrics = rubrics
        self._memo = memo
        self._extra = extra
        self._made: dict[str, str] = {}

    def __getitem__(self, name: str) -> str:
        made = self._made
        if name not in made:
            if name in self._extra:
                made[name] = self.fenced(pretty(self._extra[name]))
            else:
                made[name] = _RECIPES[name](self)
        return made[name]

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(_RECIPES), **dict.fromkeys(self._extra)})

    def __len__(self) -> int:
        return len(_RECIPES.keys() | self._extra.keys())

    def text(self, name: str) -> str:
        return str(self._inputs[name]).strip()

    def fenced(self, text: str) -> str:
        return fence(text, self._nonce)

    def kept(self, name: str, make: Callable[[], str]) -> str:
        memo = self._memo
        if name not in memo:
            memo[name] = make()
        return memo[name]

    def messages(self, name: str) -> str:
        return self.kept(name, partial(pretty, self._inputs[name]))

    def tool_calls(self) -> str:
        listed = partial(tool_calls, self._inputs["output_messages"])
        return self.kept("tool_calls", lambda: tool_call_lines(listed()))

    def rubric_rows(self) -> list[dict[str, Any]]:
        return [
            {"id": r.id, "outcome": r.expected_outcome, "weight": r.weight}
            | {"required": r.is_required}
            for r in self._rubrics
        ]

    def metadata(self, **layout: Any) -> str:
        """The case's metadata as JSON (AgentV v4's ``JSON.stringify``); none: empty."""
        given = self._inputs.get("metadata")
        return "" if given is None else json.dumps(given, ensure_ascii=False, **layout)

    def file_changes(self) -> str:
        changes = self._inputs.get("file_changes")
        return self.fenced(str(changes)) if changes else ""


#: How each variable is made, by name.
_RECIPES: dict[str, Callable[[TemplateValues], str]] = {
    "question": lambda v: v.text("question"),
    "expected_outcome": lambda v: v.text("expected_outcome"),
    "reference_answer": lambda v: v.text("reference_answer"),
    "expected_messages": lambda v: v.messages("expected_messages"),
    "input_messages": lambda v: v.messages("input_messages"),
    "candidate_answer": lambda v: v.fenced(v.text("candidate_answer")),
    "output_messages": lambda v: v.fenced(v.messages("output_messages")),
    # AgentV v4's names
    "input": lambda v: v.text("question"),
    "output": lambda v: v.fenced(v.text("candidate_answer")),
    "expected_output": lambda v: v.text("reference_answer"),
    "criteria": lambda v: v.text("expected_outcome"),
    "metadata": lambda v: v.metadata(indent=2),
    "metadata_json": lambda v: v.metadata(separators=(",", ":")),
    "rubrics": lambda v: pretty(v.rubric_rows()) if v.rubric_rows() else "",
    "rubrics_json": lambda v: (
        json.dumps(v.rubric_rows(), ensure_ascii=False) if v.rubric_rows() else ""
    ),
    "file_changes": TemplateValues.file_changes,
    "tool_calls": lambda v: v.fenced(v.tool_calls()),
}


FREEFORM_TEMPLATE = """\
You are an expert evaluator. Grade how well the candidate_answer achieves the expected_outcome \
for the original task in question. The reference_answer is a gold standard: it may be a plain \
answer or a sequence of agent messages whose last one is the final answer. The candidate does \
not need to match it word for word; judge substance, correctness and completeness. Be concise.

[[ ## expected_outcome ## ]]
{{expected_outcome}}

[[ ## question ## ]]
{{question}}

[[ ## reference_answer ## ]]
{{reference_answer}}

[[ ## candidate_answer ## ]]
{{candidate_answer}}
"""


def _sections(values: Mapping[str, str], *, with_reference: bool) -> str:
    parts = [
        f"[[ ## question ## ]]\n{values['question']}",
        f"[[ ## expected_outcome ## ]]\n{values['expected_outcome']}",
    ]
    if with_reference and values["reference_answer"]:
        parts.append(f"[[ ## reference_answer ## ]]\n{values['reference_answer']}")
    parts.append(f"[[ ## candidate_answer ## ]]\n{values['candidate_answer']}")
    return "\n\n".join(parts) + file_changes_section(values)


def file_changes_section(values: Mapping[str, str]) -> str:
    """AgentV v4 shows a built-in prompt's judge the workspace's diff, when there is one."""
    changes = values.get("file_changes")
    return f"\n\n[[ ## file_changes ## ]]\n{changes}" if changes else ""


#: What AgentV v4 tells the judge about each rubric operator (``rubric-operators.ts``).
OPERATOR_GUIDANCE = {
    "correctness": (
        "Correctness: mark satisfied only when the answer positively supports or fulfills the "
        "outcome. Omission or contradiction should not satisfy it."
    ),
    "contradiction": (
        "Contradiction guard: mark satisfied when the answer does not make a claim that "
        "contradicts the outcome. Do not require the answer to mention the outcome; mark "
        "unsatisfied only for incompatible claims."
    ),
}


def operator_guidance(rubrics: Sequence[RubricItem]) -> list[str]:
    """The guidance for the operators the items use, once each, in order of first use."""
    used = dict.fromkeys(item.operator for item in rubrics if item.operator)
    return [OPERATOR_GUIDANCE[operator] for operator in used]


def checklist_prompt(values: Mapping[str, str], rubrics: Sequence[RubricItem], intro: str) -> str:
    lines = []
    guidance = operator_guidance(rubrics)
    if guidance:
        lines += ["Operator guidance:", *(f"- {line}" for line in guidance), ""]
    for item in rubrics:
        labels = " (REQUIRED)" if item.is_required else ""
        operator = f" (operator: {item.operator})" if item.operator else ""
        lines.append(
            f"- [{item.id}]{labels} (weight: {item.weight:g}){operator}: {item.expected_outcome}"
        )
    head = intro or (
        "You are an expert evaluator. Evaluate the candidate answer against each rubric item "
        "below and decide whether it is satisfied."
    )
    return (
        f"{head}\n\n{_sections(values, with_reference=True)}\n\n[[ ## rubrics ## ]]\n"
        + "\n".join(lines)
        + "\n\nFor every rubric item, decide whether the candidate answer satisfies it and give "
        "brief reasoning."
    )


def score_range_prompt(values: Mapping[str, str], rubrics: Sequence[RubricItem], intro: str) -> str:
    blocks = []
    for item in rubrics:
        gate = f" [REQUIRED: min score {item.min_score}]" if item.min_score is not None else ""
        operator = f" (operator: {item.operator})" if item.operator else ""
        block = [f"### Criterion: {item.id} (weight: {item.weight:g}){gate}{operator}"]
        if item.expected_outcome:
            block.append(f"Description: {item.expected_outcome}")
        if item.score_ranges:
            block.append("Score ranges:")
            block += [
                f"- Score {r.score_range[0]}-{r.score_range[1]}: {r.expected_outcome}"
                for r in item.score_ranges
            ]
        else:
            block.append("Score 0-10: 0 means not met at all, 10 means fully met.")
        blocks.append("\n".join(block))
    head = intro or (
        "You are an expert evaluator. Score the candidate answer on each criterion below with an "
        "integer from 0 to 10 that falls within the range whose description fits best."
    )
    guidance = "".join(f"\n\n{line}" for line in operator_guidance(rubrics))
    return (
        f"{head}\n\n{_sections(values, with_reference=True)}\n\n[[ ## scoring_criteria ## ]]\n"
        + "\n\n".join(blocks)
        + guidance
    )
