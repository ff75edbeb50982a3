"""``skill-trigger`` (AgentV v3.1): whether the agent used a skill — a ``Skill`` tool call naming
it, a ``Read`` of a file under ``skills/<name>/``, or a tool whose output points there — or, with
``should_trigger: false``, that it did not. Scores 1 or 0 as AgentV v4.42.4 does."""

from __future__ import annotations

import json

from ..answers import tool_calls
from ..results import AssertionRow
from ..schema.checks import SkillTriggerSpec
from .base import NEEDS_SETTINGS, EvaluationContext, EvaluationScore, entry_settings


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class SkillTriggerEvaluator:
    kind = "skill_trigger"
    entry_needs = NEEDS_SETTINGS

    def evaluate(self, context: EvaluationContext) -> EvaluationScore:
        spec = entry_settings(context, SkillTriggerSpec)
        skill, folder = spec.skill, f"skills/{spec.skill}/"
        calls = tool_calls(context.output_messages or ())
        evidence = ""
        for call in calls:
            args = call.args if isinstance(call.args, dict) else {}
            if call.name.lower() == "skill" and skill in str(args.get("skill", "")):
                evidence = f'Skill tool invoked with skill="{args.get("skill", "")}"'
            elif call.name.lower() == "read":
                path = str(args.get("file_path", args.get("path", "")))
                if folder in path:
                    evidence = f"Read tool loaded skill file: {path}"
            if not evidence and call.output is not None and folder in _text(call.output):
                evidence = f'Tool "{call.name}" output referenced skill file for "{skill}"'
            if evidence:
                break
        triggered = bool(evidence)
        passed = triggered == spec.should_trigger
        if passed:
            text = (
                evidence or f'Skill "{skill}" triggered as expected'
                if spec.should_trigger
                else f'Skill "{skill}" correctly did not trigger'
            )
        elif spec.should_trigger:
            text = (
                f'Skill "{skill}" not found in {len(calls)} tool call(s)'
                if calls
                else "No tool calls recorded"
            )
        else:
            text = evidence or f'Skill "{skill}" triggered unexpectedly'
        return EvaluationScore.graded(
            1.0 if passed else 0.0,
            assertions=(AssertionRow(text=text, passed=passed),),
            expected_aspect_count=1,
        )
