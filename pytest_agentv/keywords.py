"""The keywords every judging entry point (``assert_judged``, ``assert_conversation``, the
``agentv_judge`` object) takes, and their check before anything runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from .schema.evaluators import EvaluatorConfig
    from .schema.rubrics import RubricItem

    Rubrics = Sequence[str | Mapping[str, Any] | RubricItem]
    Entries = Sequence[Mapping[str, Any] | EvaluatorConfig]


class JudgeOptions(TypedDict, total=False):
    """What to judge an answer against; every judging entry point takes these keywords."""

    expected_outcome: str | None
    question: str | None
    reference_answer: str | Mapping[str, Any] | None
    rubrics: Rubrics | None
    evaluators: Entries | None
    model: str | None
    trace: Mapping[str, Any] | None


#: What each keyword takes, and what it must be (for the message when it gets something else).
_KEYWORDS: dict[str, tuple[tuple[type, ...], str]] = {
    "question": ((str,), "a string (the question the answer replies to)"),
    "expected_outcome": ((str,), "a string (what a good answer does)"),
    "model": ((str,), "a model string such as 'openai/gpt-4o-mini'"),
    "reference_answer": (
        (str, Mapping),
        "a string or a mapping (an object for field_accuracy)",
    ),
    "trace": ((Mapping,), "a mapping like AgentV's trace_summary"),
}
_LISTS = {
    "rubrics": (
        "a list of rubric items (strings or mappings)",
        "a string, a mapping or a RubricItem",
    ),
    "evaluators": (
        "a list of mappings like the eval file's evaluators entries ([{'name': 'speed', "
        "'type': 'latency', 'threshold': 2000}])",
        "a mapping like an eval file's evaluators entry ({'name': 'speed', 'type': 'latency', "
        "...})",
    ),
}


def check_options(caller: str, options: Mapping[str, object]) -> None:
    """Refuse keywords of the wrong kind before anything runs, naming the keyword: a string
    given as ``rubrics`` would otherwise be read letter by letter, one rubric item each."""
    __tracebackhide__ = True
    from .schema.evaluators import EvaluatorConfig
    from .schema.rubrics import RubricItem

    unknown = sorted(set(options) - set(JudgeOptions.__annotations__))
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)}")
    for name, (types, wanted) in _KEYWORDS.items():
        value = options.get(name)
        if value is not None and not isinstance(value, types):
            raise TypeError(f"{caller}(): {name} must be {wanted}, not {type(value).__name__}")
    items = {"rubrics": (str, Mapping, RubricItem), "evaluators": (Mapping, EvaluatorConfig)}
    for name, (whole, each) in _LISTS.items():
        value = options.get(name)
        if value is None:
            continue
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise TypeError(f"{caller}(): {name} must be {whole}, not {type(value).__name__}")
        for index, item in enumerate(value):
            if not isinstance(item, items[name]):
                raise TypeError(
                    f"{caller}(): {name}[{index}] must be {each}, not {type(item).__name__}"
                )
