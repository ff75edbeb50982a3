"""Conversation cases (AgentV v4's ``mode: conversation``): each turn asked with the history so
far and graded through the one grading path; aggregation, ``on_turn_failure``, ``window_size``,
the per-turn report, replay, and ``assert_conversation``."""

from __future__ import annotations

import json
import re
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest

from tests.fake_openai import FakeOpenAI, Request, checklist
from tests.helpers import judge_ini, load_error, outcomes, write

#: A CLI agent that answers with everything it was sent (its prompt: the history so far).
ECHO = """\
import sys
print("SAW<" + sys.argv[1] + ">")
"""

THREE_TURNS = """
tests:
  - id: chat
    mode: conversation
    input:
      - {role: system, content: You are terse.}
    turns:
      - input: My name is Ada.
        assertions: [{type: contains, value: Ada}]
      - input: I like tea.
        assertions: [{type: contains, value: tea}]
      - input: What is my name?
        assertions: [{type: contains, value: name}]
"""


def rows(pytester: pytest.Pytester, name: str = "r.jsonl") -> list[dict[str, Any]]:
    lines = (pytester.path / name).read_text().splitlines()
    return [json.loads(line) for line in lines]


def mock_turns(pytester: pytest.Pytester, *responses: str, folder: str = ".") -> None:
    """The default target (of the project, or of ``folder``): a mock answering turn n with
    ``responses[n - 1]``."""
    write(
        pytester,
        f"{folder}/.agentv/targets.yaml",
        "targets:\n  - name: default\n    provider: mock\n    responses: "
        + json.dumps(list(responses))
        + "\n",
    )


def fixture_agent(pytester: pytest.Pytester, noted: str, reply: str) -> None:
    """An ``agentv_target`` fixture noting ``noted`` of each case it is called with in
    ``CALLS`` (written to calls.json when the session ends) and answering ``reply``."""
    write(
        pytester,
        "conftest.py",
        f"""
        import json
        import pathlib
        import pytest

        CALLS = []

        @pytest.fixture
        def agentv_target():
            def agent(case):
                CALLS.append({noted})
                return {reply}
            return agent

        def pytest_sessionfinish(session):
            pathlib.Path("calls.json").write_text(json.dumps(CALLS))
        """,
    )


def calls(pytester: pytest.Pytester) -> Any:
    return json.loads((pytester.path / "calls.json").read_text())


def test_each_turn_sends_the_history_so_far_to_a_cli_agent(pytester: pytest.Pytester) -> None:
    write(pytester, "agent.py", ECHO)
    write(
        pytester,
        ".agentv/targets.yaml",
        "targets:\n  - {name: default, provider: cli, command: 'python agent.py {PROMPT}'}\n",
    )
    write(pytester, "c.eval.yaml", THREE_TURNS)
    result = pytester.runpytest("--agentv-results=r.jsonl")
    result.assert_outcomes(passed=1)
    [row] = rows(pytester)
    answers = [turn["answer"] for turn in row["turns"]]
    assert answers[0] == "SAW<You are terse.\n\nMy name is Ada.>"
    # Turn 3 saw every earlier user turn and the agent's own earlier replies, in order.
    # Turn 2 saw the system message, turn 1, the agent's own reply to it, and its own message.
    assert answers[1] == (
        "SAW<@[System]:\nYou are terse.\n\n@[User]:\nMy name is Ada.\n\n"
        f"@[Assistant]:\n{answers[0]}\n\n@[User]:\nI like tea.>"
    )
    assert answers[2].endswith(f"@[Assistant]:\n{answers[1]}\n\n@[User]:\nWhat is my name?>")
    assert [turn["score"] for turn in row["turns"]] == [1.0, 1.0, 1.0]


def test_the_agentv_target_fixture_is_called_once_per_turn_with_the_messages_so_far(
    pytester: pytest.Pytester,
) -> None:
    write(pytester, "c.eval.yaml", THREE_TURNS)
    roles = '[m["role"] for m in case.input_messages]'
    fixture_agent(pytester, f"(case.turn, {roles})", 'case.input_messages[-1]["content"]')
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    last = calls(pytester)
    assert last == [
        [1, ["system", "user"]],
        [2, ["system", "user", "assistant", "user"]],
        [3, ["system", "user", "assistant", "user", "assistant", "user"]],
    ]


#: Each aggregation's case: its score and outcome over turns that pass, fail and pass.
AGGREGATIONS = {"mean": ("0.67", "xfailed"), "min": ("0.00", "failed"), "max": ("1.00", "passed")}


def aggregation_cases(pytester: pytest.Pytester, folder: str = ".") -> None:
    """One case per aggregation in ``folder``/c.eval.yaml, with the mock target they need."""
    mock_turns(pytester, "Hello Ada", "I forgot", "Hello Ada", folder=folder)
    write(
        pytester,
        f"{folder}/c.eval.yaml",
        "tests:\n"
        + "".join(
            f"""\
  - id: {aggregation}
    mode: conversation
    aggregation: {aggregation}
    turns:
      - {{input: I am Ada., assertions: [{{type: contains, value: Ada}}]}}
      - {{input: Who am I?, assertions: [{{type: contains, value: Ada}}]}}
      - {{input: Say hi., assertions: [{{type: contains, value: Ada}}]}}
"""
            for aggregation in AGGREGATIONS
        ),
    )


def assert_aggregations(
    pytester: pytest.Pytester, result: pytest.RunResult, folder: str = "."
) -> None:
    """``aggregation_cases`` (the only conversations of the run, written to r.jsonl) scored as
    AGGREGATIONS says."""
    found = {row["eval_id"]: row for row in rows(pytester) if "turns" in row}
    ran = outcomes(result.reprec)  # type: ignore[attr-defined]
    eval_file = "c.eval.yaml" if folder == "." else f"{folder}/c.eval.yaml"
    assert {
        case: (f"{row['score']:.2f}", ran[f"{eval_file}::{case}"]) for case, row in found.items()
    } == AGGREGATIONS
    for row in found.values():
        assert [(t["turn"], t["score"], t["verdict"]) for t in row["turns"]] == [
            (1, 1.0, "pass"),
            (2, 0.0, "fail"),
            (3, 1.0, "pass"),
        ]
        assert [entry["name"] for entry in row["evaluator_results"]] == [
            "turn-1",
            "turn-2",
            "turn-3",
        ]


def test_aggregation_of_turn_scores(pytester: pytest.Pytester) -> None:
    """One case per aggregation, in one session. (Under pytest-xdist: tests/test_targets.py's
    xdist session runs them too.)"""
    aggregation_cases(pytester)
    assert_aggregations(pytester, pytester.runpytest("--agentv-results=r.jsonl"))


def test_the_conversations_own_assertions_are_one_more_term(pytester: pytest.Pytester) -> None:
    mock_turns(pytester, "Hello Ada", "Bye Ada")
    write(
        pytester,
        "c.eval.yaml",
        """
        tests:
          - id: chat
            mode: conversation
            aggregation: min
            turns:
              - {input: Hi, assertions: [{type: contains, value: Ada}]}
              - {input: Bye, assertions: [{type: contains, value: Bye}]}
            assertions:
              - {type: contains, value: "Hello Ada"}
              - {type: contains, value: "I like tea"}
        """,
    )
    result = pytester.runpytest("--agentv-results=r.jsonl")
    result.assert_outcomes(failed=1)
    [row] = rows(pytester)
    # The transcript holds every message; one of its two checks passes: min(1, 1, 0.5).
    conversation = row["evaluator_results"][-1]
    assert (conversation["name"], conversation["score"], row["score"]) == ("conversation", 0.5, 0.5)


def test_on_turn_failure(pytester: pytest.Pytester) -> None:
    """Turn 2's answer fails: with ``continue`` turn 3 is still asked (borderline overall),
    with ``stop`` it is not (failed). One case for each, in one session."""
    write(
        pytester,
        "conftest.py",
        """
        import pytest

        @pytest.fixture
        def agentv_target():
            return lambda case: "fine" if case.turn != 2 else "broken"
        """,
    )
    write(
        pytester,
        "c.eval.yaml",
        "tests:\n"
        + "".join(
            f"""\
  - id: {policy}
    mode: conversation
    on_turn_failure: {policy}
    turns:
      - {{input: one, assertions: [{{type: contains, value: fine}}]}}
      - {{input: two, assertions: [{{type: contains, value: fine}}]}}
      - {{input: three, assertions: [{{type: contains, value: fine}}]}}
"""
            for policy in ("continue", "stop")
        ),
    )
    result = pytester.runpytest("--agentv-results=r.jsonl")
    assert outcomes(result.reprec) == {  # type: ignore[attr-defined]
        "c.eval.yaml::continue": "xfailed",
        "c.eval.yaml::stop": "failed",
    }
    found = {row["eval_id"]: row for row in rows(pytester)}
    turns = {case: [(t["answer"], t["score"]) for t in row["turns"]] for case, row in found.items()}
    assert turns == {
        "continue": [("fine", 1.0), ("broken", 0.0), ("fine", 1.0)],
        "stop": [("fine", 1.0), ("broken", 0.0), (None, 0.0)],
    }
    unsent = "not sent: turn 2 did not pass (on_turn_failure: stop)"
    assert found["stop"]["turns"][2]["error"] == unsent
    result.stdout.fnmatch_lines([f"*3  three  -        0.00  fail     {unsent}"])


def test_a_failing_middle_turn_is_named_in_the_report(pytester: pytest.Pytester) -> None:
    mock_turns(pytester, "Hello Ada", "I forgot", "Hello Ada")
    write(
        pytester,
        "c.eval.yaml",
        """
        tests:
          - id: chat
            mode: conversation
            aggregation: min
            turns:
              - {input: I am Ada., assertions: [{type: contains, value: Ada}]}
              - {input: Who am I?, assertions: [{type: contains, value: Ada}]}
              - {input: Say hi., assertions: [{type: contains, value: Ada}]}
        """,
    )
    result = pytester.runpytest("--junitxml=j.xml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*eval 'chat' failed: score 0.00 (fail)",
            "target: default",
            "",
            "conversation of 3 turns; first failing turn: 2",
            "  turn  user       reply      score  verdict  failed",
            "     1  I am Ada.  Hello Ada   1.00  pass",
            '     2  Who am I?  I forgot    0.00  fail     Output does not contain "Ada"',
            "     3  Say hi.    Hello Ada   1.00  pass",
        ]
    )
    junit = (pytester.path / "j.xml").read_text()
    assert '<property name="agentv.turn.2.score" value="0.0000" />' in junit
    assert '<property name="agentv.turn.3.verdict" value="pass" />' in junit


#: Two turns, each checked for the name the user gave in the first.
ADA_CHAT = """
tests:
  - id: chat
    mode: conversation
    turns:
      - {input: I am Ada., assertions: [{type: contains, value: Ada}]}
      - {input: Who am I?, assertions: [{type: contains, value: Ada}]}
"""


def test_the_html_report_shows_each_turn_and_its_failed_check(pytester: pytest.Pytester) -> None:
    mock_turns(pytester, "Hello Ada", "I forgot", "Hello Ada")
    write(pytester, "c.eval.yaml", ADA_CHAT)
    pytester.runpytest("--agentv-html=r.html").assert_outcomes(failed=1)
    page = (pytester.path / "r.html").read_text()
    turns = page[page.index('<ol class="turns">') : page.index("</ol>", page.index("turns"))]
    assert turns.count("<li>") == 2
    assert "I forgot" in turns and "Who am I?" in turns
    assert "✗ Output does not contain &#34;Ada&#34;" in turns


def test_a_target_that_fails_on_a_turn_leaves_the_case_not_graded(
    pytester: pytest.Pytester,
) -> None:
    mock_turns(pytester, "Hello Ada")
    write(pytester, "c.eval.yaml", THREE_TURNS.replace("value: tea", "value: x"))
    result = pytester.runpytest("--agentv-results=r.jsonl")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*eval 'chat' was not graded: turn 2: mock target 'default' has 1 responses: none for*"]
    )
    [row] = rows(pytester)
    assert row["status"] == "error"
    assert [(t["turn"], t["score"]) for t in row["turns"]] == [(1, 1.0), (2, None)]


def grade_saw(request: Request) -> str:
    """A judge that passes every rubric criterion it is asked about."""
    ids = sorted(set(re.findall(r"criterion-\d+|rubric-\d+", json.dumps(request.body))))
    return checklist(**{i.replace("-", "_"): True for i in ids})


def test_window_size_limits_what_the_judge_sees(
    project: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    """The judge of turn 3 sees the system prompt, that turn's question and reply, and the
    earlier turns only without a window (case ``whole``), not with ``window_size: 1``. One case
    for each, in one session; each system prompt names its case."""
    fake_llm.responder = grade_saw
    project.makeini(judge_ini(fake_llm))
    mock_turns(project, "reply one", "reply two", "reply three")
    windows = {"whole": "", "windowed": "window_size: 1"}
    write(
        project,
        "c.eval.yaml",
        "tests:\n"
        + "".join(
            f"""\
  - id: {case}
    mode: conversation
    {size}
    input: [{{role: system, content: SYSTEM PROMPT OF {case}}}]
    turns:
      - {{input: first question, assertions: [Answers]}}
      - {{input: second question, assertions: [Answers]}}
      - {{input: third question, assertions: [Answers]}}
"""
            for case, size in windows.items()
        ),
    )
    result = project.runpytest()
    result.assert_outcomes(passed=2)
    assert len(fake_llm.requests) == 6
    for case in windows:
        [third] = [
            text
            for request in fake_llm.requests
            if f"SYSTEM PROMPT OF {case}" in (text := json.dumps(request.body["messages"]))
            and "third question" in text
        ]
        assert "reply three" in third
        for earlier in ("first question", "reply one", "second question", "reply two"):
            assert (earlier in third) is (case == "whole"), (case, earlier)


def test_a_recorded_conversation_replays_with_zero_calls(
    project: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    def respond(request: Request) -> str:
        if "criterion-" in json.dumps(request.body):
            return grade_saw(request)
        return f"reply to {len(request.body['messages'])} messages"

    fake_llm.responder = respond
    write(
        project,
        ".agentv/targets.yaml",
        f"""
        targets:
          - name: default
            provider: openai
            model: fake-agent
            api_key: fake-key
            api_base: {fake_llm.api_base}
        """,
    )
    write(project, "c.eval.yaml", THREE_TURNS.replace("[{type: contains, value: name}]", "[Ok]"))
    ini = judge_ini(fake_llm).replace("agentv_cache_mode = off", "agentv_cache_mode = readwrite")
    project.makeini(ini)
    recorded = project.runpytest("--agentv-results=first.jsonl")
    recorded.assert_outcomes(failed=1)  # "contains Ada/tea" fail on the model's replies
    target_calls = [r for r in fake_llm.requests if "criterion-" not in json.dumps(r.body)]
    assert [len(r.body["messages"]) for r in target_calls] == [2, 4, 6]
    fake_llm.stop()
    replayed = project.runpytest("--agentv-cache-mode=replay", "--agentv-results=second.jsonl")
    replayed.assert_outcomes(failed=1)
    replayed.stdout.fnmatch_lines(["agentv: 0 model calls made, 4 replies reused from the store*"])
    assert rows(project, "first.jsonl")[0]["turns"] == rows(project, "second.jsonl")[0]["turns"]


def test_estimate_counts_each_turns_calls(project: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    project.makeini(judge_ini(fake_llm))
    write(
        project,
        "c.eval.yaml",
        """
        tests:
          - id: chat
            mode: conversation
            turns:
              - {input: one, assertions: [Answers]}
              - {input: two, assertions: [{type: contains, value: x}]}
              - {input: three, assertions: [Answers, Politely]}
            assertions: [Stays on topic]
        """,
    )
    result = project.runpytest("--agentv-estimate")
    # Turns 1 and 3 and the transcript each call the judge once; turn 2 is a plain check.
    result.stdout.fnmatch_lines(["*c.eval.yaml*3 calls*"])
    assert fake_llm.requests == []


@pytest.mark.parametrize(
    ("case", "problem"),
    [
        (
            "{id: a, input: q, turns: [{input: hi}]}",
            "tests.0.turns: 'turns' belongs to a conversation: add 'mode: conversation'*",
        ),
        ("{id: a, mode: conversation, input: q}", "tests.0.mode: a conversation needs 'turns'*"),
        ("{id: a, mode: conversation, turns: []}", "tests.0.turns: must not be empty"),
        (
            "{id: a, mode: conversation, window_size: 0, turns: [{input: hi, assertions: [x]}]}",
            "tests.0.window_size: must be at least 1 turn (got 0)",
        ),
        (
            "{id: a, mode: conversation, aggregation: median, turns: [{input: hi}]}",
            "tests.0.aggregation: must be 'mean', 'min' or 'max'",
        ),
        (
            "{id: a, mode: conversation, on_turn_failure: halt, turns: [{input: hi}]}",
            "tests.0.on_turn_failure: must be 'continue' or 'stop'",
        ),
        (
            "{id: a, input: q, aggregation: min}",
            "tests.0.aggregation: 'aggregation' belongs to a conversation*",
        ),
        (
            "{id: a, mode: conversation, turns: [{input: hi}]}",
            "evalcases.0.turns: nothing grades this conversation*",
        ),
    ],
)
def test_bad_conversations_are_load_errors_at_their_place(
    tmp_path: Path, case: str, problem: str
) -> None:
    error = load_error(tmp_path, "bad.eval.yaml", f"tests:\n  - {case}\n")
    assert fnmatch(error, f"bad.eval.yaml:2:*: {problem}"), error


def test_a_bad_conversation_is_a_collection_error(pytester: pytest.Pytester) -> None:
    write(pytester, "bad.eval.yaml", "tests:\n  - {id: a, mode: conversation, turns: []}\n")
    result = pytester.runpytest("--co", "-q")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*bad.eval.yaml:2:*: tests.0.turns: must not be empty"])


UNIT = """
import pytest
from pytest_agentv import JudgedAssertionError, assert_conversation, assert_conversation_async

def forgetful(messages):
    users = [m["content"] for m in messages if m["role"] == "user"]
    return "I don't remember" if len(users) == 3 else "Noted: " + ", ".join(users)

TURNS = [
    "My name is Ada.",
    {"input": "I like tea.", "assertions": [{"type": "contains", "value": "Ada"}]},
    {"input": "What is my name?", "assertions": [{"type": "contains", "value": "Ada"}]},
]

def test_forgets():
    with pytest.raises(JudgedAssertionError) as caught:
        assert_conversation(forgetful, turns=TURNS, aggregation="min")
    assert caught.value.result["turns"][2]["answer"] == "I don't remember"
    assert "first failing turn: 3" in str(caught.value)

def test_remembers():
    system = [{"role": "system", "content": "Be brief."}]
    score = assert_conversation(forgetful, turns=TURNS[:2], input=system)
    assert score.score == 1.0

@pytest.mark.asyncio
async def test_async_agent():
    async def agent(messages):
        return forgetful(messages)
    score = await assert_conversation_async(agent, turns=TURNS[:2])
    assert score.score == 1.0

def test_bad_turns():
    with pytest.raises(ValueError, match=r"window_size: must be at least 1 turn"):
        assert_conversation(forgetful, turns=TURNS, window_size=0)
    with pytest.raises(TypeError, match="turns must be a list"):
        assert_conversation(forgetful, turns="hi")
    with pytest.raises(ValueError, match="nothing grades this conversation"):
        assert_conversation(forgetful, turns=["hi", "again"])

def test_needs_a_judge():
    assert_conversation(forgetful, turns=[{"input": "hi", "assertions": ["Polite"]}])

def test_agent_error_names_the_turn():
    def broken(messages):
        if len(messages) > 1:
            raise RuntimeError("lost the thread")
        return "Ada"
    assert_conversation(broken, turns=TURNS)
"""


def test_assert_conversation(pytester: pytest.Pytester) -> None:
    write(pytester, "test_unit.py", UNIT)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=4, failed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["SKIPPED*assert_conversation skipped: no LLM judge is configured*"]
    )
    result.stdout.fnmatch_lines(
        [
            "*assert_conversation was not graded: turn 2: assert_conversation agent (broken) "
            "raised RuntimeError: lost the thread*"
        ]
    )


def test_recorded_answers_replay_each_turn(pytester: pytest.Pytester) -> None:
    mock_turns(pytester, "Hello Ada", "I forgot", "Hello Ada")
    checks = THREE_TURNS.replace("value: tea", "value: Ada").replace("value: name", "value: Ada")
    write(pytester, "c.eval.yaml", checks)
    pytester.runpytest("--agentv-results=first.jsonl").assert_outcomes(xfailed=1)
    mock_turns(pytester, "other")
    result = pytester.runpytest("--agentv-answers=first.jsonl", "--agentv-results=r.jsonl")
    result.assert_outcomes(xfailed=1)
    assert [t["answer"] for t in rows(pytester)[0]["turns"]] == [
        "Hello Ada",
        "I forgot",
        "Hello Ada",
    ]
    # A row without turns (another case's, AgentV's) has no answer for a turn.
    recorded = rows(pytester, "first.jsonl")[0]
    del recorded["turns"]
    (pytester.path / "first.jsonl").write_text(json.dumps(recorded) + "\n")
    result = pytester.runpytest("--agentv-answers=first.jsonl")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*not graded: turn 1: the recorded row for 'chat' in *no answer for turn 1"]
    )


CAPITALS = """
tests:
  - id: chat
    mode: conversation
    turns:
      - input: Hello.
        assertions: [{type: contains, value: Hi}]
      - input: What is the capital of France?
        assertions: [{type: contains, value: Paris}]
"""


def test_a_recorded_reply_to_another_question_is_not_graded(pytester: pytest.Pytester) -> None:
    """Turn 2 changed from France to Spain: "Paris" was graded against the new question."""
    mock_turns(pytester, "Hi", "Paris")
    write(pytester, "c.eval.yaml", CAPITALS)
    pytester.runpytest("--agentv-results=first.jsonl").assert_outcomes(passed=1)
    write(pytester, "c.eval.yaml", CAPITALS.replace("France", "Spain"))
    result = pytester.runpytest("--agentv-answers=first.jsonl")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*not graded: turn 2: the recorded answer for 'chat' in first.jsonl (--agentv-answers)"
            " was given to another input: it was asked 'What is the capital of France?', the "
            "case now asks 'What is the capital of Spain?'"
        ]
    )


def test_trials_repeat_whole_conversations(pytester: pytest.Pytester) -> None:
    fixture_agent(pytester, "(case.attempt, case.turn)", '"Ada" if case.attempt == 1 else "who?"')
    write(
        pytester,
        "c.eval.yaml",
        """
        tests:
          - id: chat
            mode: conversation
            execution: {trials: {count: 2, strategy: pass_at_k}}
            turns:
              - {input: I am Ada., assertions: [{type: contains, value: Ada}]}
              - {input: Who am I?, assertions: [{type: contains, value: Ada}]}
        """,
    )
    result = pytester.runpytest("--agentv-results=r.jsonl")
    result.assert_outcomes(passed=1)
    assert calls(pytester) == [[0, 1], [0, 2], [1, 1], [1, 2]]
    [row] = rows(pytester)
    assert [trial["score"] for trial in row["trials"]] == [0.0, 1.0]
    assert [turn["answer"] for turn in row["turns"]] == ["Ada", "Ada"]  # the passing trial's


def test_a_v4_row_s_trace_holds_every_turn(pytester: pytest.Pytester) -> None:
    """With ``--agentv-results-format agentv-v4`` a conversation's ``trace.messages`` are its
    turns, what the user said and each reply, as v4 keeps the transcript."""
    mock_turns(pytester, "Hello Ada", "I forgot")
    write(pytester, "c.eval.yaml", ADA_CHAT)
    pytester.runpytest("--agentv-results=r.jsonl", "--agentv-results-format=agentv-v4")
    [row] = rows(pytester)
    trace = row["trace"]
    assert [(m["role"], m["content"]) for m in trace["messages"]] == [
        ("user", "I am Ada."),
        ("assistant", "Hello Ada"),
        ("user", "Who am I?"),
        ("assistant", "I forgot"),
    ]
    assert trace["llm_call_count"] == 2
    assert trace["events"][-1]["type"] == "final_response"
    assert trace["events"][-1]["message"]["content"] == "I forgot"
