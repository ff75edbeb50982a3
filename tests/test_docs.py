"""The README is a short front door whose example is real: the eval file and judge script it
shows are the files under examples/, byte for byte, and the eval file passes; its links lead to
files that exist. (The manual under docs/ is checked by `mkdocs build --strict` in CI.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_LINES = 150

#: A fenced block: its info string and its text.
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
#: A block that claims to be a file: its first line names the path (from the repository root),
#: and says "(excerpt)" when it shows only part of the file.
PATH_COMMENT = re.compile(r"^# ((?:[\w.-]+/)+[\w.-]+\.\w+)( \(excerpt\))?$")
#: Markdown links and images: [text](target) and ![alt](target).
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def readme() -> str:
    return README.read_text(encoding="utf-8")


def file_blocks() -> dict[str, tuple[str, bool]]:
    """Blocks that claim to be files: path -> (the text below the path comment, excerpt?)."""
    blocks: dict[str, tuple[str, bool]] = {}
    for match in FENCE.finditer(readme()):
        first, _, rest = match.group(2).partition("\n")
        claim = PATH_COMMENT.match(first)
        if claim:
            assert claim.group(1) not in blocks, f"README shows {claim.group(1)} twice"
            blocks[claim.group(1)] = (rest, claim.group(2) is not None)
    return blocks


def shown_eval_file() -> str:
    evals = [path for path in file_blocks() if path.endswith((".eval.yaml", ".eval.yml"))]
    assert len(evals) == 1, f"README should show one eval file whole, shows {evals}"
    return evals[0]


def test_readme_is_short() -> None:
    lines = readme().count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; the manual lives under docs/"


def test_readme_starts_with_the_commands_ci_runs() -> None:
    first = next(FENCE.finditer(readme()))
    commands = [line.split("#", 1)[0].strip() for line in first.group(2).splitlines()]
    assert commands == [
        'pip install -e ".[test]" && pytest examples',
        'pip install -e ".[test]" && pytest -n auto',
    ]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "pytest examples" in ci and "pytest -n auto" in ci


def test_files_shown_in_the_readme_are_the_files() -> None:
    blocks = file_blocks()
    assert blocks, "README shows no file under a path comment such as '# examples/...'"
    for path, (shown, excerpt) in blocks.items():
        target = ROOT / path
        assert target.is_file(), f"README shows {path}, which does not exist"
        actual = target.read_text(encoding="utf-8")
        if excerpt:
            assert shown in actual, f"README's excerpt of {path} is not in the file"
        else:
            assert shown == actual, f"README's {path} differs from the file: copy it again"


def test_readme_and_getting_started_show_the_format_users_write_today() -> None:
    """AgentV v4's names (``tests``, ``criteria``, ``input``, ``assertions``), with the same
    file in v2.5.8's names one link away, on the getting-started page."""
    suite = yaml.safe_load((ROOT / shown_eval_file()).read_text(encoding="utf-8"))
    assert set(suite) == {"description", "tests"}
    assert {"id", "criteria", "input", "assertions"} <= set(suite["tests"][0])
    assert "docs/getting-started.md#in-agentv-v258s-format" in LINK.findall(readme())
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    assert (
        page.index('--8<-- "examples/evals/first.eval.yaml"')
        < page.index("### In AgentV v2.5.8's format\n")
        < page.index('--8<-- "examples/evals/first_v2.eval.yaml"')
    )
    classic = yaml.safe_load((ROOT / "examples/evals/first_v2.eval.yaml").read_text("utf-8"))
    assert [case["id"] for case in classic["evalcases"]] == [t["id"] for t in suite["tests"]]


def test_readme_shows_the_judge_its_eval_file_runs() -> None:
    path = shown_eval_file()
    suite = yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))
    scripts = [
        entry["command"]
        for case in suite["tests"]
        for entry in case["assertions"]
        if entry.get("type") == "code-grader"
    ]
    assert scripts, f"{path} should be graded by a code grader script"
    blocks = file_blocks()
    for script in scripts:
        judge = (ROOT / path).parent / script[-1]
        shown = judge.resolve().relative_to(ROOT).as_posix()
        assert shown in blocks, f"{path} runs {shown}, which README does not show"
        assert not blocks[shown][1], f"README should show {shown} whole, not an excerpt"


def test_readme_eval_file_passes(pytester: pytest.Pytester) -> None:
    path = shown_eval_file()
    cases = yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))["tests"]
    pytester.copy_example(".")
    result = pytester.runpytest("-p", "no:cacheprovider", str(Path(path).relative_to("examples")))
    result.assert_outcomes(passed=len(cases))


def test_readme_relative_links_exist() -> None:
    links = [target for target in LINK.findall(readme()) if "://" not in target]
    links = [target for target in links if not target.startswith(("#", "mailto:"))]
    assert links, "README links to no page of the manual"
    missing = [t for t in links if not (README.parent / t.split("#", 1)[0]).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"
