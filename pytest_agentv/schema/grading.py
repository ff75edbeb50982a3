"""The entries that grade an answer: a case's listed evaluators with its inline ``rubrics`` (an
``llm_judge`` placed first), the default kind when it lists none, and ``assert_judged``'s, given
in Python as an eval file gives them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any

from pydantic import ValidationError

from .base import problems
from .entries import v4_entries
from .evaluators import EvaluatorConfig
from .rubrics import RubricItem, rubric_items


def evaluator_entries(
    listed: Sequence[EvaluatorConfig], rubrics: Sequence[RubricItem] | None, default_kind: str
) -> tuple[EvaluatorConfig, ...]:
    """The evaluators that grade an answer: inline ``rubrics`` become an ``llm_judge`` named
    ``rubric`` placed first (``inline-rubric`` when that name is taken); with none at all, the
    default kind."""
    entries = list(listed)
    if rubrics:
        name = "rubric" if all(entry.name != "rubric" for entry in entries) else "inline-rubric"
        entries.insert(0, EvaluatorConfig(name=name, type="llm_judge", rubrics=list(rubrics)))
    if not entries:
        entries.append(_default_entry(default_kind))
    return tuple(entries)


@cache
def _default_entry(kind: str) -> EvaluatorConfig:
    """One entry per default kind, shared by the cases that use it (entries are frozen; a
    suite of thousands of unlisted cases made one each)."""
    return EvaluatorConfig.model_construct(name=kind, type=kind, weight=1.0, config={})


def python_entries(
    evaluators: Iterable[Mapping[str, Any] | EvaluatorConfig] | None,
    rubrics: Iterable[str | Mapping[str, Any] | RubricItem] | None,
) -> tuple[EvaluatorConfig, ...]:
    """The entries that grade an ``assert_judged`` answer, given in Python like an eval file's
    (inline rubrics become an ``llm_judge``); an invalid one is a ``ValueError`` naming it."""
    entries: list[EvaluatorConfig] = []
    given = [e if isinstance(e, EvaluatorConfig) else dict(e) for e in evaluators or ()]
    for index, entry in enumerate(v4_entries(given, strings=False)):
        if isinstance(entry, EvaluatorConfig):
            entries.append(entry)
            continue
        try:
            entries.append(EvaluatorConfig.model_validate(entry))
        except ValidationError as exc:
            raise ValueError(f"evaluators[{index}] is invalid: {problems(exc)}") from None
    items = [dict(item) if isinstance(item, Mapping) else item for item in rubrics or ()]
    return evaluator_entries(entries, rubric_items(items), "llm_judge")
