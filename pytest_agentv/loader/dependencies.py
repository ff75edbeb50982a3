"""``depends_on`` as AgentV v4 checks it when a file loads: every id names another case of the
same file, and no case depends on itself through others (the cycle is named, ``a → b → a``)."""

from __future__ import annotations

from collections.abc import Callable

from ..schema.evalfile import EvalSuite
from ..yamlfile import Loc


def check_dependencies(suite: EvalSuite, fail: Callable[[Loc, str], None]) -> None:
    """Call ``fail`` at the first dependency that names no case, the case itself, or closes a
    cycle."""
    index = {case.id: n for n, case in enumerate(suite.evalcases)}
    for n, case in enumerate(suite.evalcases):
        for d, dep in enumerate(case.depends_on or []):
            if dep == case.id:
                fail(("evalcases", n, "depends_on", d), f"case '{case.id}' depends on itself")
            if dep not in index:
                fail(("evalcases", n, "depends_on", d), f"no case of this file has the id '{dep}'")
    deps = {case.id: case.depends_on or [] for case in suite.evalcases}
    state: dict[str, bool] = {}  # False while its dependencies are being walked, then True
    for start in deps:
        if start in state:
            continue
        state[start], path, stack = False, [start], [iter(deps[start])]
        while stack:
            step: str | None = next(stack[-1], None)
            if step is None:
                state[path.pop()] = True
                stack.pop()
            elif step not in state:
                state[step] = False
                path.append(step)
                stack.append(iter(deps[step]))
            elif not state[step]:
                cycle = [*path[path.index(step) :], step]
                last = path[-1]
                where = ("evalcases", index[last], "depends_on", deps[last].index(step))
                fail(where, f"dependency cycle: {' → '.join(cycle)}")
