"""Verdicts cannot be planted, clamped or lost: gates travel with scores, custom evaluators are
not failed by default, prompts are filled in, details reach the results file."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from pytest_agentv import EvaluationScore
from tests.fake_openai import FakeOpenAI, checklist, freeform
from tests.helpers import judge_ini, outcome_counts, rows_in, write

DETAILS_JUDGE = """\
import json, sys
config = json.load(sys.stdin)["config"]
print(json.dumps({"score": config["score"], "details": {"checked": ["a", "b"]}}))
"""


def rows(pytester: pytest.Pytester, name: str = "out.jsonl") -> dict[str, dict]:  # type: ignore[type-arg]
    lines = (pytester.path / name).read_text().splitlines()
    return {row["eval_id"]: row for row in map(json.loads, lines)}


def test_a_failed_gate_survives_the_mean_of_several_evaluators(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    # The rubric scores 0.5 with its required item unmet; the code judge scores 1.0; the mean
    # is 0.75 (borderline), but the unmet required item fails the case.
    fake_llm.responder = lambda r: checklist(rubric_1=False, rubric_2=True)
    write(judged, "judge.py", DETAILS_JUDGE)
    write(
        judged,
        "g.eval.yaml",
        """
        evalcases:
          - id: gated
            input: Refunds?
            rubrics: [States the 30-day window, Is polite]
            evaluators:
              - {name: code, type: code_judge, script: [python, judge.py], config: {score: 1}}
        """,
    )
    result = judged.runpytest("--agentv-results=out.jsonl")
    result.assert_outcomes(failed=1)
    row = rows(judged)["gated"]
    assert row["score"] == pytest.approx(0.75)
    assert row["verdict"] == "fail"
    rubric, code = row["evaluator_results"]
    assert (rubric["score"], rubric["verdict"]) == (0.5, "fail")
    assert (code["score"], code["verdict"]) == (1.0, "pass")
    result.stdout.fnmatch_lines(
        ["*eval 'gated' failed: score 0.75 (fail) (a required criterion or check was not met)"]
    )


def test_scores_carry_their_gate_and_derive_their_verdict() -> None:
    assert EvaluationScore(score=1.0).verdict == "pass"
    assert EvaluationScore(score=0.7).verdict == "borderline"
    assert EvaluationScore(score=0.2).verdict == "fail"
    gated = EvaluationScore(score=0.5, gate_failed=True)
    assert (gated.verdict, gated.gate_failed) == ("fail", True)
    # An explicit fail on a passing score is a gate.
    assert EvaluationScore(score=0.9, verdict="fail").gate_failed


CUSTOM = """
import pytest
from pytest_agentv import EvaluationScore

class Always:
    kind = "always"
    def evaluate(self, context):
        return EvaluationScore(score=1.0)

@pytest.hookimpl
def pytest_agentv_make_evaluator(config, kind):
    return Always() if kind == "always" else None
"""


def test_a_custom_evaluator_that_scores_one_passes(project: pytest.Pytester) -> None:
    write(project, "conftest.py", CUSTOM)
    write(
        project,
        "c.eval.yaml",
        """
        evalcases:
          - id: custom
            input: q
            evaluators: [{name: always, type: always}]
        """,
    )
    project.runpytest("--agentv-results=out.jsonl").assert_outcomes(passed=1)
    assert rows(project)["custom"]["verdict"] == "pass"


EXITS = ["evaluator", "sync_evaluator", "async_target", "target"]


def test_sys_exit_in_user_code_is_not_graded_and_the_run_goes_on(project: pytest.Pytester) -> None:
    """An evaluator or target written like a script may call sys.exit: that case is not graded,
    and the plugin's event loop keeps serving the next case (it used to hang the run). One
    folder for each place it is called from, in one run."""
    for where in EXITS:
        evaluate = "async def evaluate" if where == "evaluator" else "def evaluate"
        exits = where.endswith("evaluator")
        write(
            project,
            f"{where}/conftest.py",
            f"""
            import sys
            import pytest
            from pytest_agentv import EvaluationScore

            class Exits:
                kind = "exits"
                {evaluate}(self, context):
                    if context.eval_case.id == "first" and {exits}:
                        sys.exit(3)
                    return EvaluationScore(score=1.0)

            @pytest.hookimpl
            def pytest_agentv_make_evaluator(config, kind):
                return Exits() if kind == "exits" else None

            @pytest.fixture
            def agentv_target():
                {"async " if where == "async_target" else ""}def answer(case):
                    if case.id == "first" and not {exits}:
                        sys.exit(2)
                    return "an answer"
                return answer
            """,
        )
        write(
            project,
            f"{where}/c.eval.yaml",
            """
            execution:
              evaluators: [{name: exits, type: exits}]
            evalcases:
              - {id: first, input: q}
              - {id: second, input: q}
            """,
        )
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-rp", timeout=120)
    result.assert_outcomes(passed=len(EXITS), errors=len(EXITS))
    for where in EXITS:
        code = 3 if where.endswith("evaluator") else 2
        result.stdout.fnmatch_lines(
            [
                f"{where}/c.eval.yaml:5: eval 'first' was not graded: *SystemExit: {code}",
                f"PASSED {where}/c.eval.yaml::second",
            ]
        )


def test_a_prompt_file_in_rubric_mode_is_filled_in(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = lambda r: checklist(rubric_1=True)
    write(
        judged,
        "grader.md",
        "Grade the answer to {{question}} strictly.\nThe answer: {{candidate_answer}}\n",
    )
    write(
        judged,
        "p.eval.yaml",
        """
        evalcases:
          - id: templated
            input: How long do refunds take?
            evaluators:
              - name: rubric
                type: llm_judge
                prompt: grader.md
                rubrics: [Gives the 30-day window]
        """,
    )
    judged.runpytest().assert_outcomes(passed=1)
    user = fake_llm.requests[0].user
    assert "{{" not in user
    assert "Grade the answer to How long do refunds take? strictly." in user
    assert "The answer: <AGENTV-DATA nonce=" in user
    assert "- [rubric-1] (REQUIRED) (weight: 1): Gives the 30-day window" in user


def test_one_listed_evaluator_keeps_its_details_in_the_results_file(
    project: pytest.Pytester,
) -> None:
    write(project, "judge.py", DETAILS_JUDGE)
    write(
        project,
        "d.eval.yaml",
        """
        evalcases:
          - id: one
            input: q
            evaluators:
              - {name: code, type: code_judge, script: [python, judge.py], config: {score: 1}}
        """,
    )
    project.runpytest("--agentv-results=out.jsonl").assert_outcomes(passed=1)
    [entry] = rows(project)["one"]["evaluator_results"]
    assert entry["name"] == "code" and entry["details"] == {"checked": ["a", "b"]}


def test_an_invalid_rubric_in_assert_judged_is_a_clear_error(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_rubric="""
        from pytest_agentv import assert_judged

        def test_overlap():
            assert_judged("answer", rubrics=[{
                "id": "brevity",
                "score_ranges": [
                    {"score_range": [0, 5], "expected_outcome": "long"},
                    {"score_range": [5, 10], "expected_outcome": "short"},
                ],
            }])
        """
    )
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ValueError: rubrics.0.score_ranges: Overlapping score_ranges in rubric 'brevity': "
            "[[]0, 5] overlaps with [[]5, 10]"
        ]
    )
    result.stdout.no_fnmatch_line("*pydantic_core._pydantic_core.ValidationError*")


@pytest.mark.parametrize("where", ["a-folder", "a-file/results.jsonl"])
def test_an_unwritable_results_path_is_a_usage_error(project: pytest.Pytester, where: str) -> None:
    (project.path / "a-folder").mkdir()
    (project.path / "a-file").write_text("not a folder")
    write(project, "r.eval.yaml", "evalcases: [{id: a, input: q}]\n")
    result = project.runpytest(f"--agentv-results={where}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --agentv-results=*{where} cannot be written: *"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("where", ["a-file", "a-file/cache"])
def test_an_unusable_cache_dir_is_a_usage_error_before_any_call(
    judged: pytest.Pytester, fake_llm: FakeOpenAI, where: str
) -> None:
    """Found only when the first reply was stored, it used to cost a model call per case."""
    (judged.path / "a-file").write_text("not a folder")
    write(judged, "r.eval.yaml", "evalcases: [{id: a, input: q, expected_outcome: x}]\n")
    result = judged.runpytest(f"--agentv-cache-dir={where}", "--agentv-cache-mode=readwrite")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --agentv-cache-dir=*a-file* cannot be used: *a-file is not a folder*"]
    )
    assert fake_llm.requests == []


TWO_KEYWORD_CASES = """
execution:
  evaluators:
    - {name: k, type: code_judge, script: [python, keywords.py], keywords: [30 days]}
evalcases: [{id: a, input: q}, {id: b, input: q}]
"""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_results_file_that_fails_mid_run_is_reported_once(
    project: pytest.Pytester, run_args: list[str]
) -> None:
    write(project, "r.eval.yaml", TWO_KEYWORD_CASES)
    result = project.runpytest(*run_args, "--agentv-results=/dev/full", "--junitxml=junit.xml")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output
    message = (
        "ERROR: --agentv-results=/dev/full could not be written: [Errno 28] No space left on "
        "device; the results file is incomplete"
    )
    assert output.count(message) == 1
    result.stdout.fnmatch_lines(["*2 evaluations: 2 pass*", message])
    assert 'name="agentv.score"' in (project.path / "junit.xml").read_text()


def test_a_cache_dir_behind_a_folder_that_cannot_be_read_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder on the way that the user may not look into (as root the tests cannot make
    one, so looking into it is made to fail): a usage error, not an INTERNALERROR."""
    from pytest_agentv import settings

    real = Path.exists

    def exists(self: Path, **kwargs: object) -> bool:
        if self.name == "secret":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(settings.Path, "exists", exists)
    with pytest.raises(pytest.UsageError) as excinfo:
        settings._check_folder(tmp_path / "secret" / "cache", "--agentv-cache-dir", write=True)
    assert str(excinfo.value) == (
        f"--agentv-cache-dir={tmp_path}/secret/cache cannot be used: {tmp_path}/secret: "
        "Permission denied; give a folder that exists or can be created"
    )


ESCAPES = "chr(27) + '[2K' + chr(27) + ']0;owned' + chr(7) + chr(13)"


def test_escape_sequences_never_reach_the_terminal(project: pytest.Pytester) -> None:
    write(
        project,
        "loud.py",
        f"""
        import json
        print(json.dumps({{"score": 0, "misses": ["bad" + {ESCAPES} + "answer"]}}))
        """,
    )
    write(
        project,
        "broken_agent.py",
        f"""
        import sys
        sys.stderr.write("oops" + {ESCAPES})
        sys.exit(3)
        """,
    )
    write(
        project,
        ".agentv/targets.yaml",
        """
        targets:
          - name: default
            provider: mock
            response: answer
          - name: broken
            provider: cli
            command_template: python broken_agent.py
        """,
    )
    write(
        project,
        "e.eval.yaml",
        """
        evalcases:
          - id: judged
            input: q
            evaluators: [{name: loud, type: code_judge, script: [python, loud.py]}]
          - id: agent
            input: q
            execution: {target: broken}
            evaluators: [{name: loud, type: code_judge, script: [python, loud.py]}]
        """,
    )
    result = project.runpytest("-rA")
    result.assert_outcomes(failed=1, errors=1)
    output = result.stdout.str()
    assert "\x1b" not in output and "\x07" not in output
    assert "bad\\x1b[2K\\x1b]0;owned\\x07\\x0danswer" in output
    assert "oops\\x1b[2K\\x1b]0;owned\\x07" in output


def test_credentials_in_a_judge_url_are_not_printed(project: pytest.Pytester) -> None:
    result = project.runpytest(
        "--agentv-judge-model=openai/x",
        "--agentv-judge-api-base=http://alice:s3cr3t-pw@judge.internal:8000/v1",
        "--co",
    )
    result.stdout.fnmatch_lines(["agentv: judge=openai/x at http://[[]redacted]@judge.internal*"])
    assert "s3cr3t-pw" not in result.stdout.str()


def test_a_target_that_never_answers_is_not_graded_at_its_deadline(
    project: pytest.Pytester,
) -> None:
    write(
        project,
        "conftest.py",
        """
        import asyncio, pytest

        @pytest.fixture
        def agentv_target():
            async def never(case):
                await asyncio.Event().wait()
            return never
        """,
    )
    write(
        project,
        "h.eval.yaml",
        """
        evalcases:
          - id: hangs
            input: q
            evaluators: [{name: kw, type: code_judge, script: [python, keywords.py]}]
        """,
    )
    result = project.runpytest("--agentv-target-timeout=0.5")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*eval 'hangs' was not graded: target 'agentv_target' gave no answer within 0.5s "
            "(--agentv-target-timeout)*"
        ]
    )


def test_interrupted_store_writes_leave_nothing_behind(
    project: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    """A SIGKILL during a store write could leave ``.tmp-*.json`` files that a user would
    commit: temporary files now end in ``.tmp``, are git-ignored and swept by the next run."""
    judged = project
    judged.makeini(judge_ini(fake_llm).replace("agentv_cache_mode = off\n", ""))
    store = judged.path / ".agentv" / "cache"
    (store / "ab").mkdir(parents=True)
    stale = [store / "ab" / ".tmp-x1.json", store / "ab" / ".abcdef.x2.tmp"]
    fresh = store / "ab" / ".abcdef.x3.tmp"
    for path in [*stale, fresh]:
        path.write_text('{"format": 1, "response": {"content": "{}"}}')
    old = time.time() - 3600
    for path in stale:
        os.utime(path, (old, old))
    fake_llm.responder = lambda r: freeform(0.9)
    write(judged, "f.eval.yaml", "evalcases: [{id: a, input: q, expected_outcome: x}]\n")
    judged.runpytest().assert_outcomes(passed=1)
    assert not any(path.exists() for path in stale)
    assert fresh.exists()  # perhaps another run's write under way: left alone
    assert (store / ".gitignore").read_text().splitlines()[-1] == "*.tmp"
    assert not list(store.rglob(".tmp-*")) and all(
        p.name.endswith(".tmp") or not p.name.startswith(".") or p.name == ".gitignore"
        for p in store.rglob("*")
    )


ODD_DETAILS = """
import decimal, pathlib, pytest
from pytest_agentv import EvaluationScore

class Odd:
    kind = "odd"
    def evaluate(self, context):
        return EvaluationScore(
            score=1.0,
            details={"where": pathlib.Path("/tmp/x"), "amount": decimal.Decimal("1.5"),
                     3: float("nan"), "pair": (1, 2)},
        )

@pytest.hookimpl
def pytest_agentv_make_evaluator(config, kind):
    return Odd() if kind == "odd" else None
"""


def test_a_relative_script_runs_from_its_cwd(project: pytest.Pytester) -> None:
    write(project, "judges/judge.sh", "#!/bin/sh\necho '{\"score\": 1}'\n")
    (project.path / "judges" / "judge.sh").chmod(0o755)
    write(
        project,
        "j.eval.yaml",
        """
        evalcases:
          - id: relative
            input: q
            evaluators: [{name: sh, type: code_judge, script: [./judge.sh], cwd: judges}]
        """,
    )
    project.runpytest().assert_outcomes(passed=1)


def test_an_unreadable_file_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_agentv.errors import ConfigError, EvalFileError
    from pytest_agentv.paths import read_reference
    from pytest_agentv.yamlfile import parse_yaml

    path = tmp_path / "x.eval.yaml"
    path.write_text("evalcases: []\n")

    def denied(self: Path, *args: object, **kwargs: object) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    monkeypatch.setattr(Path, "read_text", denied)
    with pytest.raises(EvalFileError, match=r"x\.eval\.yaml:1:1: cannot read file: Permission"):
        parse_yaml(path, "x.eval.yaml")
    with pytest.raises(ConfigError, match=r"'x\.eval\.yaml' cannot be read: Permission denied"):
        read_reference(path, "x.eval.yaml")


def test_a_replayed_model_target_keeps_its_usage_so_the_verdict_is_the_same(
    project: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    """A reply replayed from the store used to report no tokens, so a token_usage evaluator
    that passed when the run was recorded failed on replay: replay changed the verdict."""
    project.makeini(judge_ini(fake_llm).replace("agentv_cache_mode = off\n", ""))
    write(
        project,
        ".agentv/targets.yaml",
        f"""
        targets:
          - name: default
            provider: openai
            model: agent-model
            api_base: {fake_llm.api_base}
        """,
    )
    fake_llm.responder = lambda r: "Returns are accepted for 30 days."
    write(
        project,
        "u.eval.yaml",
        """
        evalcases:
          - id: usage
            input: Returns?
            evaluators: [{name: tokens, type: token_usage, max_total: 500}]
        """,
    )
    project.runpytest("--agentv-results=first.jsonl").assert_outcomes(passed=1)
    assert len(fake_llm.requests) == 1
    replayed = project.runpytest("--agentv-cache-mode=replay", "--agentv-results=second.jsonl")
    replayed.assert_outcomes(passed=1)
    assert len(fake_llm.requests) == 1
    first, second = rows(project, "first.jsonl")["usage"], rows(project, "second.jsonl")["usage"]
    assert first["trace_summary"]["token_usage"] == {"input": 100, "output": 20}
    assert second["trace_summary"] == first["trace_summary"]
    assert (second["score"], second["hits"]) == (first["score"], first["hits"])


def test_a_code_judge_that_says_fail_fails_the_case(project: pytest.Pytester) -> None:
    write(project, "says.py", 'import json; print(json.dumps({"score": 0.9, "verdict": "fail"}))\n')
    write(
        project,
        "s.eval.yaml",
        "evalcases: [{id: says, input: q, evaluators: "
        "[{name: s, type: code_judge, script: [python, says.py]}]}]\n",
    )
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*score 0.90 (fail) (a required criterion or check was not met)"])


def test_prompt_scripts_get_the_environment_code_judges_get(
    project: pytest.Pytester, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAM_SETTING", "team-value-42")
    project.makeini(judge_ini(fake_llm, code_judge_env="TEAM_SETTING"))
    write(
        project,
        "prompt.py",
        "import os\n"
        "print('Grade {{candidate_answer}} for ' + os.environ.get('TEAM_SETTING', '?'))\n",
    )
    write(
        project,
        "p.eval.yaml",
        """
        evalcases:
          - id: scripted
            input: q
            evaluators:
              - {name: j, type: llm_judge, prompt: {script: [python, prompt.py]}}
        """,
    )
    project.runpytest().assert_outcomes(passed=1)
    assert "for team-value-42" in fake_llm.requests[0].user


def test_what_json_or_utf_8_cannot_hold_loses_no_results(project: pytest.Pytester) -> None:
    """A JSON ``"\\ud800"`` escape decodes to text that UTF-8 cannot hold: written as it came, it
    crashed the results file (INTERNALERROR) and pytest-xdist's reports, losing cases. An
    evaluator's details of any type (paths, decimals, NaN, tuples, keys that are no string)
    reach the results file as JSON. Under pytest-xdist: tests/test_collection.py's
    test_runs_under_xdist."""
    write_odd_outputs(project)
    result = project.runpytest("--agentv-results=out.jsonl", "--junitxml=junit.xml")
    assert_odd_outputs_kept(result, project.path / "out.jsonl")


def write_odd_outputs(project: pytest.Pytester, folder: str = "") -> None:
    """Eval files (in ``folder``) whose target, code judge and custom evaluator give what JSON
    or UTF-8 cannot hold; the custom kind is the project's (its ``conftest.py``)."""
    if folder:
        write(project, f"{folder}keywords.py", (project.path / "keywords.py").read_text())
    write(project, f"{folder}answer.json", '{"text": "Refunds within 30 days \\ud800 ok"}\n')
    verdict = r'{"score": 0.1, "misses": ["odd \udc00 text"], "details": {"k\ud800": 1}}'
    write(project, f"{folder}judge.py", f"print({verdict!r})\n")
    write(
        project,
        f"{folder}.agentv/targets.yaml",
        "targets:\n  - {name: default, provider: cli, command_template: cat answer.json}\n",
    )
    write(
        project,
        f"{folder}s.eval.yaml",
        """
        evalcases:
          - id: target-wrote-it
            input: q
            evaluators:
              - {name: kw, type: code_judge, script: [python, keywords.py], keywords: [30 days]}
          - id: judge-wrote-it
            input: q
            evaluators: [{name: odd, type: code_judge, script: [python, judge.py]}]
          - id: after
            input: q
            evaluators:
              - {name: kw, type: code_judge, script: [python, keywords.py], keywords: [30 days]}
        """,
    )
    write(project, "conftest.py", ODD_DETAILS)
    write(
        project,
        f"{folder}t.eval.yaml",
        "evalcases: [{id: odd, input: q, evaluators: [{name: o, type: odd}]}]\n",
    )


def assert_odd_outputs_kept(result: pytest.RunResult, results: Path, folder: str = "") -> None:
    """Every case of ``write_odd_outputs`` has its outcome and its row, the odd text replaced
    (``result`` may have run other files too)."""
    assert outcome_counts(result, folder) == {"passed": 3, "failed": 1}
    assert "INTERNALERROR" not in result.stdout.str()
    found = {row["eval_id"]: row for row in rows_in(results, folder)}
    assert found["target-wrote-it"]["candidate_answer"] == "Refunds within 30 days \ufffd ok"
    assert found["judge-wrote-it"]["misses"] == ["odd \ufffd text"]
    [entry] = found["odd"]["evaluator_results"]
    assert entry["details"] == {"where": "/tmp/x", "amount": "1.5", "3": None, "pair": [1, 2]}


def test_a_lone_surrogate_in_a_jsonl_dataset_is_refused_at_its_line(
    project: pytest.Pytester,
) -> None:
    write(
        project,
        "d.eval.jsonl",
        '{"id": "fine", "input": "q"}\n{"id": "c\\ud800", "input": "q"}\n',
    )
    result = project.runpytest("--co", "-q")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["d.eval.jsonl:2:*escape without its pair is not Unicode text*"])


@pytest.mark.parametrize("reads", ["--agentv-answers", "--agentv-baseline"])
def test_the_results_path_cannot_be_a_file_the_run_reads(
    project: pytest.Pytester, reads: str
) -> None:
    """Opening the results file empties it: as the run's answers or baseline (pytest-xdist
    workers read them after the controller opened it) it lost what the run was to read."""
    write(project, "r.eval.yaml", TWO_KEYWORD_CASES)
    project.runpytest("--agentv-results=out.jsonl").assert_outcomes(passed=2)
    before = (project.path / "out.jsonl").read_text()
    result = project.runpytest(f"{reads}=out.jsonl", f"--agentv-results={project.path}/out.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --agentv-results=*out.jsonl is also the {reads} file*"])
    assert (project.path / "out.jsonl").read_text() == before


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("r.eval.yaml", "evalcases: [{id: a, input: q}]\n"),
        ("d.eval.jsonl", '{"id": "a", "input": "q"}\n'),
    ],
)
def test_a_results_path_that_holds_something_else_is_refused(
    project: pytest.Pytester, name: str, content: str
) -> None:
    write(project, name, content)
    result = project.runpytest(f"--agentv-results={name}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--agentv-results=*{name} is a file that does not hold*"])
    assert (project.path / name).read_text() == content


def test_a_lone_surrogate_in_recorded_results_is_replaced_not_refused(
    project: pytest.Pytester,
) -> None:
    """JavaScript writes a lone surrogate as ``\\ud800``: AgentV's results files may hold one,
    and a whole baseline or answers file must not be refused for it."""
    write(
        project,
        "r.eval.yaml",
        """
        evalcases:
          - id: a
            input: q
            evaluators:
              - {name: k, type: code_judge, script: [python, keywords.py], keywords: [30 days]}
        """,
    )
    row = '{"eval_id": "a", "dataset": "r", "score": 1, "candidate_answer": "30 days \\ud800"}\n'
    write(project, "agentv.jsonl", row)
    result = project.runpytest(
        "--agentv-answers=agentv.jsonl",
        "--agentv-baseline=agentv.jsonl",
        "--agentv-results=o.jsonl",
    )
    result.assert_outcomes(passed=1)
    assert rows(project, "o.jsonl")["a"]["candidate_answer"] == "30 days \ufffd"


RLO, LRI, PDI = "\u202e", "\u2066", "\u2069"


def test_bidi_controls_are_shown_escaped_never_raw(project: pytest.Pytester) -> None:
    """U+202E shows ``evil\\u202egnp.exe`` as "evilexe.png": in ids, names and what judges
    wrote it is escaped (test names, the terminal, JUnit, the results file's text fields);
    the id and the answer stay as written in the results file (they are data)."""
    write(
        project,
        "loud.py",
        """
        import json
        print(json.dumps({"score": 0, "misses": ["looks " + chr(0x202e) + "fine"],
                          "reasoning": chr(0x2066) + "x" + chr(0x2069)}))
        """,
    )
    case_id = f"evil{RLO}gnp.exe"
    write(
        project,
        "b.eval.yaml",
        f"""
        evalcases:
          - id: "{case_id}"
            input: q
            evaluators: [{{name: "lo{RLO}ud", type: code_judge, script: [python, loud.py]}}]
        """,
    )
    result = project.runpytest("-rA", "--junitxml=junit.xml", "--agentv-results=out.jsonl")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*looks \\u202efine*", "*b.eval.yaml::evil_u202egnp.exe*"])
    junit = (project.path / "junit.xml").read_text()
    row = json.loads((project.path / "out.jsonl").read_text())
    for text in (result.stdout.str(), junit, json.dumps(row["misses"], ensure_ascii=False)):
        assert not any(c in text for c in (RLO, LRI, PDI)), text
    assert 'name="evil_u202egnp.exe"' in junit
    assert 'name="agentv.evaluator.&quot;lo\\u202eud&quot;.score"' in junit
    assert row["misses"] == ["looks \\u202efine"]
    assert row["evaluator_results"][0]["reasoning"] == "\\u2066x\\u2069"
    assert row["eval_id"] == case_id


def test_test_names_show_invisible_characters() -> None:
    from pytest_agentv import collect

    ids = [f"a{RLO}b", "a_u202eb", "plain", "bell\x07"]
    assert collect.test_names(ids) == ["a_u202eb-2", "a_u202eb", "plain", "bell_x07"]
