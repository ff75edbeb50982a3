"""Canary secrets in the environment never reach an artifact, however a run goes wrong."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_agentv import redaction
from tests.fake_openai import FakeOpenAI, Request, Status
from tests.fake_openai import freeform as freeform_reply
from tests.helpers import examples, judge_ini, write

# How models are called: every test here runs through each judge transport.
pytestmark = pytest.mark.transports

CANARIES = {
    "OPENAI_API_KEY": "sk-canary-openai-7f3a9c1e5b2d8f40",
    "ANTHROPIC_API_KEY": "sk-ant-canary-4e8b1d6f2a9c3e7b",
    "AWS_SECRET_ACCESS_KEY": "awsCanary9d2f7b4e1a6c8e3f5b0d",
    "MY_TOKEN": "tok-canary-2c7e9a4f1b8d3e6a",
    "X_PASSWORD": "pw-canary-8a3f6d1c9e4b7a2f",
}

SUITE = """
evalcases:
  - id: judge-401
    input: "auth please"
    expected_outcome: x
  - id: judge-echoes
    input: "echo please"
    expected_outcome: x
  - id: cli-leaks
    input: q
    execution: {target: leaky_cli}
  - id: answer-is-a-key
    input: q
    expected_outcome: x
    execution: {target: key_answer}
  - id: code-judge-leaks
    input: q
    evaluators: [{name: leak, type: code_judge, script: [python, leak.py]}]
"""

TARGETS = """
targets:
  - name: default
    provider: mock
    response: A normal answer.
  - name: leaky_cli
    provider: cli
    command_template: 'echo "auth failed for $OPENAI_API_KEY and $X_PASSWORD" >&2; exit 1'
  - name: key_answer
    provider: mock
    response: ${{ ANTHROPIC_API_KEY }}
"""

LEAKY_JUDGE = """
import json
secret = open("secret.txt").read().strip()
print(json.dumps({"score": 0, "misses": [f"found {secret}"], "reasoning": f"token={secret}"}))
"""

UNIT = """
import os
from pytest_agentv import assert_judged

def test_answer_with_a_secret():
    assert_judged("leaked " + os.environ["AWS_SECRET_ACCESS_KEY"], expected_outcome="no secrets")
"""


def respond(request: Request) -> object:
    key = CANARIES["OPENAI_API_KEY"]
    if "auth please" in request.user:
        return Status(401, body=json.dumps({"error": {"message": f"Incorrect API key: {key}"}}))
    return freeform_reply(0.1, [], [f"saw {key}"], f"the header had Bearer {key}")


@pytest.mark.parametrize("junit_logging", ["no", "all"])
def test_no_canary_in_any_artifact(
    project: pytest.Pytester,
    fake_llm: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    junit_logging: str,
) -> None:
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    ini = judge_ini(fake_llm).replace("agentv_cache_mode = off", "agentv_cache_mode = readwrite")
    project.makeini(ini)
    fake_llm.responder = respond  # type: ignore[assignment]
    write(project, ".agentv/targets.yaml", TARGETS)
    write(project, "leak.py", LEAKY_JUDGE)
    write(project, "secret.txt", CANARIES["MY_TOKEN"])
    write(project, "s.eval.yaml", SUITE)
    project.makepyfile(test_unit=UNIT)
    result = project.runpytest(
        "-vv",
        "-rA",
        "--tb=long",
        "-l",
        "--junitxml=junit.xml",
        "-o",
        f"junit_logging={junit_logging}",
        "--agentv-results=results.jsonl",
    )
    result.assert_outcomes(failed=4, errors=2)
    assert fake_llm.requests, "the judge was called"
    artifacts = {
        "terminal": result.stdout.str() + result.stderr.str(),
        "junit": (project.path / "junit.xml").read_text(),
        "results": (project.path / "results.jsonl").read_text(),
        "store": "".join(p.read_text() for p in (project.path / ".agentv/cache").rglob("*.json")),
    }
    assert artifacts["store"], "replies were stored"
    for artifact, text in artifacts.items():
        for name, value in CANARIES.items():
            assert value not in text, (artifact, name)
            assert value[:16] not in text, (artifact, name)
    assert "[redacted]" in artifacts["results"] and "[redacted]" in artifacts["junit"]


#: Pieces that make token shapes and near misses when joined at random.
PIECES = [
    "sk-",
    "Bearer ",
    "AIza",
    "ghp_",
    "ghs_",
    "github_pat_",
    "xoxb-",
    "AKIA",
    "API_KEY=",
    "Access-Token=",
    "api-key=",
    "acce\u017fs_token=",
    "AP\u0130-KEY=",
    "https://",
    "user:pw@",
    "@",
    ":",
    "=",
    "&",
    " ",
    "\n",
    '"',
    "ABCDEFGHIJKLMNOPQRSTUV",
    "abcdefgh1234",
    "0123456789",
    "canary-12345678abc",
    "é",
    "-",
    "_",
]


@settings(max_examples=examples(2000), deadline=None, derandomize=True)
@given(parts=st.lists(st.sampled_from(PIECES), max_size=12))
def test_text_without_a_mark_is_never_a_secret(parts: list[str]) -> None:
    """Redaction skips its pattern for text that holds none of its marks (most text; it was
    the pattern's cost on every string of every row): whatever the text, the answer is the
    pattern's own."""
    redactor = redaction._Redactor(frozenset({"canary-12345678abcdef"}))
    text = "".join(parts)
    assert redactor.sub(text) == redactor.pattern.sub(redaction.REDACTED, text)


@pytest.mark.parametrize(
    "shape",
    [
        "https://user:pw@example.com",
        "sk-abcdefgh1234",
        "Bearer abcdefgh1234",
        "AIza" + "b" * 20,
        "ghp_" + "b" * 20,
        "github_pat_" + "b" * 20,
        "xoxb-abcdefghij",
        "AKIAABCDEFGHIJ234567",
        "Api_Key=abc",
        "ACCESS-TOKEN=abc",
        "ap\u0131_key=abc",
        "canary-12345678zz",
    ],
)
def test_each_token_shape_alone_is_redacted(shape: str) -> None:
    """Each shape with no other mark beside it: the marks that let text skip the pattern
    cover every one of its token shapes."""
    redactor = redaction._Redactor(frozenset({"canary-12345678abcdef"}))
    assert redaction.REDACTED in redactor.sub(f"it was {shape} then")


_JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.lists(st.sampled_from(PIECES), max_size=6).map("".join),
    st.sampled_from(["\ud800", 'quote"canary-12345678x', "back\\slash", "line\nbreak", "\x1b[2J"]),
)
_JSON_KEYS = st.one_of(
    st.sampled_from(["text", "api_key", "sk-abcdefgh1234", "é", "x"]),
    st.none(),
    st.booleans(),
    st.integers(),
)


@settings(max_examples=examples(1000), deadline=None, derandomize=True)
@given(
    value=st.recursive(
        _JSON_LEAVES,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.lists(inner, max_size=4).map(tuple),
            st.dictionaries(_JSON_KEYS, inner, max_size=4),
        ),
        max_leaves=12,
    ),
    secret=st.sampled_from(["canary-12345678abcdef", 'canary"12345678abcdef']),
)
def test_a_structure_is_redacted_alike_through_json_and_walked(value: object, secret: str) -> None:
    """``redact_obj`` skips its walk for structures whose JSON text holds no mark (a case's
    row, most of the time): whatever the structure, the result is the walk's, and JSON."""
    redactor = redaction._Redactor(frozenset({secret}))
    saved, redaction._compiled = redaction._compiled, redactor
    try:
        fast = redaction.redact_obj(value)
    finally:
        redaction._compiled = saved
    assert fast == redaction._redact_with(redactor, value)
    json.dumps(fast, allow_nan=False)  # strict JSON: no NaN, no object, no tuple key
