"""An eval file: the suite, its cases, their execution settings, and a JSONL dataset's sidecar."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from ..spellings import generations, spelled
from .base import NOT_BLANK, Model, Schema, Text
from .conversation import (
    Aggregation,
    ConversationTurn,
    TurnFailure,
    WindowSize,
    check_conversation,
    conversation_schema,
)
from .entries import entries_or_strings
from .evaluators import Entries, EvaluatorConfig, Preprocessor
from .messages import MESSAGES_SHORTHAND, Message, as_messages
from .rubrics import Rubrics, rubrics_shorthand
from .suite import Budget, DependencyPolicy, DependsOn, FilePath, Matrix, Threshold, Workers
from .trials import TrialsConfig
from .workspace import WorkspaceField


def _name_of(value: Any) -> Any:
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _dataset_references(schema: dict[str, Any]) -> None:
    """The cases may also be a dataset's path (a file or a folder of case folders), and a list
    may name files among its cases (``file://`` paths or globs): AgentV v4's external datasets,
    which the loader reads in their place. (``if``/``else`` rather than ``anyOf``, so that an
    editor still names the unknown key in a case.)"""
    schema["type"] = ["array", "string"]
    schema["pattern"] = r"\S"
    case = schema["items"]
    schema["items"] = {"if": {"type": "string"}, "then": {"pattern": "^file://"}, "else": case}


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
        json_schema_extra=entries_or_strings,
    )
    trials: TrialsConfig | None = None
    #: A case's opt-out of the file's assertions and input (AgentV v4).
    skip_defaults: bool = Field(False, strict=True)
    #: AgentV v4's target matrix (each case runs once per target) and pass bar.
    targets: Matrix | None = None
    threshold: Threshold | None = None


class SuiteExecution(Execution):
    """A file's ``execution``: a case's, the suite's budget and how many of its cases may be in
    flight at once (AgentV v4)."""

    budget_usd: Budget | None = None
    workers: Workers | None = None


class EvalCase(Model):
    """One eval case as written in the file."""

    model_config = ConfigDict(json_schema_extra=conversation_schema)

    id: CaseId
    description: str | None = None
    expected_outcome: str = Field("", validation_alias=spelled("EvalCase", "expected_outcome"))
    #: Required, except in a conversation (``check_conversation``).
    input_messages: list[Message] = Field(
        default_factory=list,
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
        json_schema_extra=entries_or_strings,
    )
    execution: Execution | None = None
    rubrics: Rubrics | None = Field(None, json_schema_extra=rubrics_shorthand)
    evaluator: str | None = None
    grader: str | None = None
    #: AgentV v4.15's conversation mode (``schema.conversation``).
    mode: Literal["conversation"] | None = None
    turns: list[ConversationTurn] | None = Field(None, min_length=1)
    aggregation: Aggregation | None = None
    on_turn_failure: TurnFailure | None = None
    window_size: WindowSize | None = None
    #: AgentV v4: data for ``{{ name }}`` placeholders in the case's fields (read when the file
    #: loads), files attached to its input, its dependencies, and descriptive metadata.
    vars: dict[str, Any] | None = None
    input_files: list[FilePath] | None = None
    depends_on: DependsOn | None = None
    on_dependency_failure: DependencyPolicy | None = None
    metadata: dict[str, Any] | None = None
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

    @model_validator(mode="after")
    def _conversation(self) -> EvalCase:
        check_conversation(self)
        return self

    @property
    def entry_lists(self) -> list[Entries | None]:
        """The case's own evaluator lists, its turns' included."""
        lists = [self.evaluators, self.execution.evaluators if self.execution else None]
        return lists + [turn.assertions for turn in self.turns or ()]


class JsonlSidecar(Model):
    """The sidecar of a JSONL dataset: defaults for every case of the ``.jsonl`` beside it; an
    eval file sets the same for its cases."""

    schema_: str | None = Field(None, alias="$schema")
    description: str | None = None
    dataset: Dataset | None = None
    execution: SuiteExecution | None = None
    evaluator: str | None = None
    #: AgentV v4's suite name (``suite`` in its results; the dataset when none is given),
    #: descriptive keys, tags (pytest markers), and input prepended to every case's.
    name: Text | None = None
    version: Text | None = None
    category: str | None = None
    tags: list[Annotated[str, Field(strict=True), NOT_BLANK]] | None = None
    metadata: dict[str, Any] | None = None
    #: AgentV v4's governance tags (OWASP, MITRE ATLAS, controls...): every case's
    #: ``metadata.governance``, over the one ``metadata`` gives (``case_metadata``).
    governance: dict[str, Any] | None = None
    input: list[Message] | None = Field(None, json_schema_extra=MESSAGES_SHORTHAND)
    input_files: list[FilePath] | None = None

    @field_validator("input", mode="before")
    @classmethod
    def _input(cls, value: Any) -> Any:
        return None if value is None else as_messages(value, "user")

    #: AgentV v4: the workspace every case runs in (a mapping, or a workspace file's path).
    workspace: WorkspaceField = None


class EvalSuite(JsonlSidecar):
    """A whole eval file."""

    target: str | None = None
    grader: str | None = None
    evalcases: list[EvalCase] = Field(
        validation_alias=spelled("EvalSuite", "evalcases"),
        min_length=1,
        json_schema_extra=_dataset_references,
    )
    #: AgentV v4's file-level assertions, added to every case's own (``execution.evaluators``
    #: too, in a file written with v4's names).
    assertions: Entries | None = Field(
        None,
        validation_alias=spelled("EvalSuite", "assertions"),
        json_schema_extra=entries_or_strings,
    )
    #: AgentV v4: how every LLM judge of the file reads the answer's files, by media type.
    preprocessors: list[Preprocessor] | None = None
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
                lists += case.entry_lists
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


def _merged(case: dict[str, Any], file: dict[str, Any]) -> dict[str, Any]:
    """``file``'s metadata under ``case``'s, as AgentV v4 merges them
    (``mergeSuiteMetadataPayload``): lists join, the file's items first and each once; mappings
    merge key by key; any other value of the case's wins."""
    merged = dict(case)
    for key, given in file.items():
        own = merged.get(key)
        if isinstance(given, list) and isinstance(own, list):
            joined: dict[str, Any] = {}
            for item in [*given, *own]:
                joined.setdefault(item if isinstance(item, str) else json.dumps(item), item)
            merged[key] = list(joined.values())
        elif isinstance(given, dict) and isinstance(own, dict):
            merged[key] = _merged(own, given)
        elif key not in merged:
            merged[key] = given
    return merged


def case_metadata(case: EvalCase, suite: JsonlSidecar) -> dict[str, Any] | None:
    """A case's metadata with the file's merged in (AgentV v4's ``extractSuiteMetadataPayload``:
    the file's ``governance`` wins over its ``metadata.governance``); None when neither has
    any."""
    file = dict(suite.metadata or {})
    if suite.governance is not None:
        file["governance"] = suite.governance
    merged = _merged(case.metadata or {}, file)
    return merged or None
