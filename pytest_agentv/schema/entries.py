"""An ``assertions`` list as AgentV v4 writes it, made into evaluator entries before they are
validated: plain strings become one ``rubrics`` entry (criteria, weighing as many), and entries
without a ``name`` get AgentV's generated name, made unique."""

from __future__ import annotations

from typing import Any

#: Kinds whose generated name carries their ``value`` (AgentV ``generateAssertionName``).
_NAMED_BY_VALUE = ("contains", "icontains", "starts-with", "ends-with", "equals")
_NAMED_BY_COUNT = ("contains-any", "contains-all", "icontains-any", "icontains-all")


def named(entry: dict[str, Any]) -> bool:
    """Whether an entry names itself: ``name``, or its other spelling ``id``."""
    return "name" in entry or "id" in entry


def generated_name(entry: dict[str, Any]) -> str:
    """AgentV v4's name for an unnamed entry: its kind (kebab-case), with its value, the length
    of its list, the first 30 characters of its pattern, or its skill."""
    kind = str(entry["type"]).replace("_", "-")
    value = entry.get("value")
    if kind in _NAMED_BY_VALUE and isinstance(value, str) and value:
        return f"{kind}-{value}"
    if kind in _NAMED_BY_COUNT and isinstance(value, list):
        return f"{kind}-{len(value)}"
    if kind == "regex" and isinstance(value, str) and value:
        return f"regex-{value[:30]}"
    if kind == "skill-trigger" and isinstance(entry.get("skill"), str) and entry["skill"]:
        return f"skill-trigger-{entry['skill']}"
    return kind


def _strings_as_rubrics(items: list[Any]) -> list[Any]:
    """Every string becomes a criterion of one ``rubrics`` entry, placed where the first string
    was and weighing as many as there are criteria (AgentV ``parseGraderList``)."""
    strings = [item.strip() for item in items if isinstance(item, str) and item.strip()]
    if not any(isinstance(item, str) for item in items):
        return items
    out: list[Any] = []
    placed = False
    for item in items:
        if not isinstance(item, str):
            out.append(item)
        elif not placed:
            placed = True
            if strings:
                out.append({"type": "rubrics", "criteria": strings, "weight": len(strings)})
    return out


def v4_entries(value: Any, *, strings: bool = True) -> Any:
    """An ``assertions`` list with its plain strings made a rubric (unless ``strings`` is
    False: a composite's members) and every entry named; names given are kept (a repeated one
    is an error later), generated ones never collide."""
    if not isinstance(value, list):
        return value
    items = _strings_as_rubrics(value) if strings else value
    taken = {item.get("name", item.get("id")) for item in items if isinstance(item, dict)}
    entries: list[Any] = []
    for item in items:
        if isinstance(item, dict) and not named(item) and isinstance(item.get("type"), str):
            base = name = generated_name(item)
            count = 2
            while name in taken:
                name, count = f"{base}-{count}", count + 1
            taken.add(name)
            item = {"name": name, **item}
        entries.append(item)
    return entries


def entries_or_strings(schema: dict[str, Any]) -> None:
    """An assertions list's JSON Schema: it may hold plain strings (AgentV v4: criteria of one
    ``rubrics`` entry) besides its entries, which the schema still checks."""
    for form in schema.get("anyOf", ()):
        entry = form.get("items")
        if form.get("type") == "array" and isinstance(entry, dict):
            form["items"] = {"anyOf": [entry, {"type": "string"}]}
