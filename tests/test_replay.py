"""The record/replay store: record once against a server, replay offline, miss on any change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentv.llm.replay import request_key
from tests.fake_openai import FakeOpenAI, Request, Status, checklist
from tests.fake_openai import freeform as freeform_reply
from tests.helpers import judge_ini, write

# How models are called: every test here runs through each judge transport.
pytestmark = pytest.mark.transports

SUITE = """
evalcases:
  - id: freeform
    expected_outcome: Gives the 30-day window
    input: Returns?
  - id: checklist
    input: Refunds?
    rubrics:
      - Mentions 30 days
      - {id: tone, expected_outcome: Friendly, required: false, weight: 0.5}
  - id: low
    expected_outcome: Explains the warranty
    input: Warranty?
"""


def grade(request: Request) -> str:
    if '"satisfied"' in request.system:
        return checklist(rubric_1=True, tone=False)
    return freeform_reply(0.2 if "warranty" in request.user else 0.9, ["x"], ["y"])


def store_files(root: Path) -> list[Path]:
    return sorted((root / ".agentv" / "cache").rglob("*.json"))


def ini(server: FakeOpenAI, mode: str) -> str:
    return judge_ini(server).replace("agentv_cache_mode = off", f"agentv_cache_mode = {mode}")


def outcomes(result: pytest.RunResult) -> dict[str, int]:
    return result.parseoutcomes()


def test_record_then_replay_offline(project: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = grade
    write(project, "s.eval.yaml", SUITE)
    project.makeini(ini(fake_llm, "readwrite"))
    recorded = project.runpytest("--agentv-results=first.jsonl")
    recorded.assert_outcomes(passed=1, xfailed=1, failed=1)
    assert len(fake_llm.requests) == 3
    files = store_files(project.path)
    assert len(files) == 3

    fake_llm.stop()  # from here on, any HTTP call would fail
    replayed = project.runpytest("--agentv-cache-mode=replay", "--agentv-results=second.jsonl")
    replayed.assert_outcomes(passed=1, xfailed=1, failed=1)
    replayed.stdout.fnmatch_lines(
        ["agentv: 0 model calls made, 3 replies reused from the store, 0 tokens, $0.0000"]
    )

    def rows(name: str) -> dict[str, dict]:  # type: ignore[type-arg]
        data = [json.loads(line) for line in (project.path / name).read_text().splitlines()]
        return {
            row["eval_id"]: {k: row[k] for k in ("score", "verdict", "hits", "misses")}
            for row in data
        }

    assert rows("first.jsonl") == rows("second.jsonl")
    assert store_files(project.path) == files


def test_changes_miss_in_replay_mode(project: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = grade
    write(project, "s.eval.yaml", SUITE)
    project.makeini(ini(fake_llm, "readwrite"))
    project.runpytest().assert_outcomes(passed=1, xfailed=1, failed=1)
    fake_llm.stop()
    write(project, "s.eval.yaml", SUITE.replace("Mentions 30 days", "Mentions thirty days"))
    write(
        project,
        ".agentv/targets.yaml",
        "targets:\n  - {name: default, provider: mock, response: A different answer.}\n",
    )
    result = project.runpytest("--agentv-cache-mode=replay")
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines(
        [
            "*eval 'checklist' was not graded: judge openai/fake-judge: no stored reply for "
            "this request in .agentv/cache (cache mode 'replay'). Record it by running once "
            "with --agentv-cache-mode readwrite and a configured model, then commit the store*",
        ]
    )


def test_a_stored_reply_that_gives_a_key_twice_is_no_stored_reply(
    project: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = lambda r: freeform_reply(0.2)
    write(project, "s.eval.yaml", "evalcases:\n  - {id: low, expected_outcome: X, input: Q}\n")
    project.makeini(ini(fake_llm, "readwrite"))
    project.runpytest().assert_outcomes(failed=1)
    [stored] = store_files(project.path)
    text = stored.read_text()
    content = json.loads(text)["response"]["content"]
    written = f'"content": {json.dumps(content, ensure_ascii=False)}'
    planted = json.dumps(content.replace("0.2", "0.95"))
    stored.write_text(text.replace(written, f'{written},\n    "content": {planted}', 1))
    assert "0.95" in json.loads(stored.read_text())["response"]["content"]  # the last one wins
    fake_llm.stop()
    result = project.runpytest("--agentv-cache-mode=replay")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*eval 'low' was not graded*no stored reply for this request*"])


def test_store_files_are_stable_readable_and_secret_free(
    project: pytest.Pytester, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-store-0123456789abcdef")
    fake_llm.responder = grade
    write(project, "s.eval.yaml", SUITE)
    project.makeini(ini(fake_llm, "readwrite"))
    project.runpytest()
    first = {p.name: p.read_text() for p in store_files(project.path)}
    project.runpytest("--agentv-cache-mode=refresh")
    second = {p.name: p.read_text() for p in store_files(project.path)}
    assert first == second
    assert len(fake_llm.requests) == 6
    for text in first.values():
        document = json.loads(text)
        assert text == json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        assert set(document) == {"format", "key", "request", "response"}
        assert set(document["request"]) == {
            "model",
            "messages",
            "temperature",
            "max_tokens",
            "response_format",
            "protocol",
            "trial",
        }
        assert document["request"]["model"] == "openai/fake-judge"
        assert "sk-canary" not in text and "authorization" not in text.lower()
        assert fake_llm.api_base not in text
        assert "{nonce}" in text


def test_errors_and_unparseable_replies_are_never_stored(
    project: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = lambda r: "no json" if "Returns" in r.user else Status(500)
    write(project, "s.eval.yaml", SUITE)
    project.makeini(ini(fake_llm, "readwrite"))
    project.runpytest("--agentv-judge-retries=1").assert_outcomes(errors=3)
    assert store_files(project.path) == []


def test_off_mode_neither_reads_nor_writes(project: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = grade
    write(project, "s.eval.yaml", SUITE)
    project.makeini(ini(fake_llm, "readwrite"))
    project.runpytest()
    project.runpytest("--agentv-cache-mode=off").assert_outcomes(passed=1, xfailed=1, failed=1)
    assert len(fake_llm.requests) == 6
    project.runpytest().assert_outcomes(passed=1, xfailed=1, failed=1)
    assert len(fake_llm.requests) == 6


def test_api_base_is_not_part_of_the_key(project: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = grade
    write(project, "s.eval.yaml", SUITE)
    project.makeini(ini(fake_llm, "readwrite"))
    project.runpytest()
    fake_llm.stop()
    result = project.runpytest(
        "--agentv-cache-mode=replay", "--agentv-judge-api-base=http://127.0.0.1:9/v1"
    )
    result.assert_outcomes(passed=1, xfailed=1, failed=1)


def test_llm_target_replies_are_stored(project: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    write(
        project,
        ".agentv/targets.yaml",
        f"targets:\n  - {{name: default, provider: litellm, model: openai/agent, "
        f"api_base: {fake_llm.api_base}}}\n",
    )
    fake_llm.responder = lambda r: "30 days" if r.body["model"] == "agent" else freeform_reply(0.9)
    write(project, "s.eval.yaml", SUITE.split("  - id: checklist")[0])
    project.makeini(ini(fake_llm, "readwrite"))
    project.runpytest().assert_outcomes(passed=1)
    assert len(store_files(project.path)) == 2
    fake_llm.stop()
    project.runpytest("--agentv-cache-mode=replay").assert_outcomes(passed=1)


def test_a_stored_reply_never_reports_negative_usage_or_cost(
    project: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    """A store edited to say prompt_tokens -10000000 and cost_usd -5 gave the replayed answer
    a negative cost and 20 tokens: both passed their limits."""
    write(
        project,
        ".agentv/targets.yaml",
        f"targets:\n  - {{name: default, provider: litellm, model: openai/agent, "
        f"api_base: {fake_llm.api_base}}}\n",
    )
    fake_llm.responder = lambda r: "30 days"
    write(
        project,
        "s.eval.yaml",
        """
        evalcases:
          - id: cheap
            input: Returns?
            evaluators:
              - {name: budget, type: cost, budget: 0.01}
              - {name: short, type: token_usage, max_total: 100}
        """,
    )
    project.makeini(ini(fake_llm, "readwrite"))
    project.runpytest()
    [stored] = store_files(project.path)
    entry = json.loads(stored.read_text())
    entry["response"]["usage"]["prompt_tokens"] = -10_000_000
    entry["response"]["cost_usd"] = -5
    stored.write_text(json.dumps(entry))
    fake_llm.stop()
    result = project.runpytest("--agentv-cache-mode=replay")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*✗ No cost data available in trace", "*✗ No token usage data available in trace"]
    )


def test_key_covers_what_changes_a_reply() -> None:
    base = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0,
        "max_tokens": None,
        "response_format": None,
        "protocol": "p",
        "trial": 0,
    }
    keys = {request_key(base)}
    for field, value in [
        ("model", "m2"),
        ("messages", [{"role": "user", "content": "hi!"}]),
        ("temperature", 0.5),
        ("max_tokens", 10),
        ("response_format", {"type": "json_object"}),
        ("protocol", "p2"),
        ("trial", 1),
    ]:
        keys.add(request_key({**base, field: value}))
    assert len(keys) == 8
    assert request_key(dict(reversed(list(base.items())))) == request_key(base)
