"""AgentV v4's suite settings, by the field types eval files give them: a matrix of targets
(``execution.targets``), the pass bar (``execution.threshold``), the suite's budget
(``execution.budget_usd``), dependencies between cases (``depends_on``), per-case ``vars`` and
the files an input attaches (``input_files``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema

from .base import FINITE, NOT_BLANK, Text, first_repeat

#: The pass bar: a case passes at or above it (AgentV's ``execution.threshold``, 0 to 1).
Threshold = Annotated[float, Field(ge=0, le=1, strict=True, allow_inf_nan=False), FINITE]
#: A suite's budget in US dollars (more than 0).
Budget = Annotated[float, Field(gt=0, strict=True, allow_inf_nan=False), FINITE]

#: What a failed dependency does to a case: AgentV v4's ``on_dependency_failure``.
DependencyPolicy = Literal["skip", "fail", "run"]

#: A file a case's input attaches, by its path.
FilePath = Annotated[str, Field(strict=True), NOT_BLANK]

_TARGET_REF = {
    "anyOf": [
        {"type": "string", "pattern": r"\S"},
        {
            "type": "object",
            "properties": {"name": {"type": "string", "pattern": r"\S"}},
            "required": ["name"],
            "additionalProperties": False,
        },
    ]
}


def _target_name(value: Any) -> Any:
    """A matrix entry: a target's name, or ``{name: ...}``. AgentV v4's ``use_target`` and
    ``hooks`` on an entry (a target run under another name, per-target workspace hooks) are
    refused rather than ignored."""
    if isinstance(value, dict):
        others = sorted(set(value) - {"name"})
        if others:
            raise ValueError(
                f"a matrix target is a name (or {{name: ...}}); '{others[0]}' on an entry "
                "(AgentV v4) is not supported by pytest-agentv"
            )
        value = value.get("name")
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a matrix target is a target's name")
    return value.strip()


def _once(names: list[str]) -> list[str]:
    repeated = first_repeat(names)
    if repeated is not None:
        raise ValueError(f"target '{repeated}' is listed twice")
    return names


#: ``execution.targets``: run each case once per target.
Matrix = Annotated[
    list[Annotated[str, BeforeValidator(_target_name), WithJsonSchema(_TARGET_REF)]],
    Field(min_length=1),
    AfterValidator(_once),
]

#: ``depends_on``: ids of cases of the same file that run first.
DependsOn = Annotated[list[Text], Field(min_length=1)]
