"""An eval file: the suite, its cases, their execution settings, and a JSONL dataset's sidecar."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, PrivateAttr, field_validator, model_validator

from ..spellings import generations, spelled
from .base import Model, Schema, Text
from .evaluators import Entries, EvaluatorConfig
from .messages import MESSAGES_SHORTHAND, Message, as_messages
from .rubrics import Rubrics, rubrics_shorthand
from .trials import TrialsConfig
from .workspace import WorkspaceField


def _name_of(value: Any) -> Any:
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _entries_or_strings(schema: dict[str, Any]) -> None:
    """An assertions list may hold plain strings (AgentV v4: criteria of one ``rubrics`` entry)
    besides its entries, which the schema still checks."""
    for form in schema.get("anyOf", ()):
        entry = form.get("items")
        if form.get("type") == "array" and isinstance(entry, dict):
            form["items"] = {"anyOf": [entry, {"type": "string"}]}


#: A dataset name written as a number (``dataset: 2024``) is the text of that number.
Dataset = Annotated[str, BeforeValidator(_name_of), Schema({"type": ["string", "number"]})]

#: Characters no case id may hold: control characters (a line break, a tab...).
_CONTROL = "\x00-\x1f\x7f"
#: A case id: not blank, and no control character (``EvalCase._id_chars`` says which rule).
CaseId = Annotated[Text, Schema({"pattern": f"^[^{_CONTROL}]*\\S[^{_CONTROL}]*$"})]


class Execution(Model):
    target: str | None = None
    evaluators: Entries | None = Field(
        None,
        validation_alias=spelled("Execution", "evaluators"),
        json_schema_extra=_entries_or_strings,
    )
    trials: TrialsConfig | None = None
    #: A case's opt-out of the file's assertions (AgentV v4).
    skip_defaults: bool = Field(False, strict=True)


class EvalCase(Model):
    """One eval case as written in the file."""

    id: CaseId
    description: str | None = None
    expected_outcome: str = Field("", validation_alias=spelled("EvalCase", "expected_outcome"))
    input_messages: list[Message] = Field(
        validation_alias=spelled("EvalCase", "input_messages"),
        min_length=1,
        json_schema_extra=MESSAGES_SHORTHAND,
    )
    expected_messages: list[Message] = Field(
        default_factory=list,
        validation_alias=spelled("EvalCase", "expected_messages"),
        json_schema_extra=MESSAGES_SHORTHAND,
    )
    conversation_id: Text | None = None
    evaluators: Entries | None = Field(
        None,
        validation_alias=spelled("EvalCase", "evaluators"),
        json_schema_extra=_entries_or_strings,
    )
    execution: Execution | None = None
    rubrics: Rubrics | None = Field(None, json_schema_extra=rubrics_shorthand)
    evaluator: str | None = None
    grader: str | None = None
    #: AgentV v4: the case's workspace (its fields replace the file's).
    workspace: WorkspaceField = None

    @field_validator("id")
    @classmethod
    def _id_chars(cls, value: str) -> str:
        """Any id AgentV accepts is kept (the pytest name is made safe from it), except what no
        test name can carry: nothing at all, or control characters such as line breaks."""
        if not value.strip():
            raise ValueError("case id must not be empty")
        if re.search(f"[{_CONTROL}]", value):
            raise ValueError(
                f"case id {value!r} contains a control character (a line break, tab...), "
                "which no pytest test name, terminal line or JUnit report can carry"
            )
        return value

    @field_validator("input_messages", mode="before")
    @classmethod
    def _input(cls, value: Any) -> Any:
        return as_messages(value, "user")

    @field_validator("expected_messages", mode="before")
    @classmethod
    def _expected(cls, value: Any) -> Any:
        return [] if value is None else as_messages(value, "assistant")


class JsonlSidecar(Model):
    """The sidecar of a JSONL dataset: defaults for every case of the ``.jsonl`` beside it; an
    eval file sets the same for its cases."""

    schema_: str | None = Field(None, alias="$schema")
    description: str | None = None
    dataset: Dataset | None = None
    execution: Execution | None = None
    evaluator: str | None = None
    #: AgentV v4: the workspace every case runs in (a mapping, or a workspace file's path).
    workspace: WorkspaceField = None


class EvalSuite(JsonlSidecar):
    """A whole eval file."""

    target: str | None = None
    grader: str | None = None
    evalcases: list[EvalCase] = Field(
        validation_alias=spelled("EvalSuite", "evalcases"), min_length=1
    )
    #: AgentV v4's file-level assertions, added to every case's own (``execution.evaluators``
    #: too, in a file written with v4's names).
    assertions: Entries | None = Field(
        None,
        validation_alias=spelled("EvalSuite", "assertions"),
        json_schema_extra=_entries_or_strings,
    )
    _v4: bool = PrivateAttr(False)

    @model_validator(mode="before")
    @classmethod
    def _generation(cls, value: Any) -> Any:
        if isinstance(value, dict):
            value = {**value, "_later": bool(generations(value)[1])}
        return value

    @model_validator(mode="after")
    def _remember_generation(self) -> EvalSuite:
        self._v4 = bool((self.model_extra or {}).pop("_later", False))
        if self._v4:
            lists = [self.assertions, self.execution.evaluators if self.execution else None]
            for case in self.evalcases:
                lists += [case.evaluators, case.execution.evaluators if case.execution else None]
            for entry in (entry for entries in lists for entry in entries or ()):
                entry.in_v4_file()
        return self

    @property
    def v4(self) -> bool:
        """Written with AgentV v4's names: the file's assertions add to a case's own."""
        return self._v4


def listed_evaluators(case: EvalCase, suite: EvalSuite) -> list[EvaluatorConfig]:
    """The evaluators a file lists for a case: case ``execution.evaluators`` > case
    ``evaluators``; then the file's (``assertions``, else ``execution.evaluators``): AgentV
    v2.5.8 uses them for the cases that list none, v4 adds them after every case's own unless
    the case's ``execution.skip_defaults`` is true."""
    own = (case.execution.evaluators if case.execution else None) or case.evaluators or []
    defaults = suite.assertions or (suite.execution.evaluators if suite.execution else None)
    if not suite.v4:
        return list(own or defaults or [])
    if case.execution and case.execution.skip_defaults:
        return list(own)
    taken = {entry.name for entry in own}
    added: list[EvaluatorConfig] = []
    for entry in defaults or ():
        name, count = entry.name, 2
        while name in taken:  # the case's own entry has the name: the file's gets a suffix
            name, count = f"{entry.name}-{count}", count + 1
        taken.add(name)
        added.append(entry if name == entry.name else entry.model_copy(update={"name": name}))
    return [*own, *added]
