"""``--agentv-shard K/N``: every test in exactly one shard, the same deal in every shard
whatever else it runs with, and a case kept with the cases it depends on."""

from __future__ import annotations

import json
from itertools import chain
from pathlib import Path
from xml.etree import ElementTree

import pytest

from pytest_agentv.__main__ import main
from pytest_agentv.collect import spec_of
from pytest_agentv.shards import deal
from tests.helpers import write
from tests.test_v4_suite_settings import DEPENDENCIES, assert_dependents_held

CASES = "tests:\n" + "".join(
    f"  - {{id: case-{n}, input: q, assertions: [{{type: contains, value: x}}]}}\n"
    for n in range(24)
)
PYTHON_TESTS = "\n".join(f"def test_{n}():\n    pass\n" for n in range(6))


def selected(pytester: pytest.Pytester, *args: str) -> list[str]:
    """The node ids a collect-only run keeps (after ``-k``, ``-m`` and the shard)."""
    reprec = pytester.inline_run("--co", "-p", "no:cacheprovider", *args)
    [call] = reprec.getcalls("pytest_collection_finish")
    return [item.nodeid for item in call.session.items]


def dealt(pytester: pytest.Pytester, count: int) -> list[list[str]]:
    """Each of ``count`` shards' node ids as ``deal`` makes them from one collect-only run: the
    deal as a function, where the other tests run the option once per shard."""
    reprec = pytester.inline_run("--co", "-p", "no:cacheprovider")
    [call] = reprec.getcalls("pytest_collection_finish")
    items = call.session.items
    shards = deal(items, count, spec_of)
    return [
        [i.nodeid for i, to in zip(items, shards, strict=True) if to == k] for k in range(count)
    ]


@pytest.fixture
def suite(project: pytest.Pytester) -> pytest.Pytester:
    write(project, "s.eval.yaml", CASES)
    write(project, "test_plain.py", PYTHON_TESTS)
    return project


def test_every_test_runs_in_exactly_one_shard(suite: pytest.Pytester) -> None:
    everything = selected(suite)
    shards = [selected(suite, f"--agentv-shard={k}/4") for k in range(1, 5)]
    assert sorted(chain.from_iterable(shards)) == sorted(everything)
    assert all(shards), "a shard of 30 tests is empty: the deal is not balanced"
    assert max(map(len, shards)) <= 3 * min(map(len, shards))
    # The same deal every time, and in the collection's order within a shard.
    assert selected(suite, "--agentv-shard=2/4") == shards[1]
    assert shards[1] == [nodeid for nodeid in everything if nodeid in shards[1]]


def test_the_deal_composes_with_k_and_the_twins_of_the_option(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = selected(suite, "-k", "case-1 or test_2")
    shards = [selected(suite, "-k", "case-1 or test_2", f"--agentv-shard={k}/3") for k in (1, 2, 3)]
    assert sorted(chain.from_iterable(shards)) == sorted(chosen)
    monkeypatch.setenv("AGENTV_SHARD", "1/3")
    assert selected(suite, "-k", "case-1 or test_2") == shards[0]
    assert selected(suite, "-k", "case-1 or test_2", "--agentv-shard=3/3") == shards[2]


def test_a_case_added_elsewhere_moves_no_other(suite: pytest.Pytester) -> None:
    before = dealt(suite, 3)
    write(
        suite,
        "later.eval.yaml",
        "tests:\n  - {id: new, input: q, assertions: [{type: contains, value: x}]}\n",
    )
    after = dealt(suite, 3)
    for k in range(3):
        assert [n for n in after[k] if "later.eval.yaml" not in n] == before[k]


def test_a_case_runs_in_the_shard_of_the_cases_it_depends_on(project: pytest.Pytester) -> None:
    chained = "tests:\n" + "".join(
        f"  - {{id: c{n}, input: q, depends_on: [c{n - 1}], "
        "assertions: [{type: contains, value: x}]}\n"
        if n
        else "  - {id: c0, input: q, assertions: [{type: contains, value: x}]}\n"
        for n in range(6)
    )
    write(project, "chain.eval.yaml", chained)
    write(project, "s.eval.yaml", CASES)
    shards = dealt(project, 4)
    [holding] = [shard for shard in shards if any("chain.eval.yaml" in n for n in shard)]
    assert [n for n in holding if "chain.eval.yaml" in n] == [
        f"chain.eval.yaml::c{n}" for n in range(6)
    ]


def test_durations_of_a_previous_run_balance_the_shards(project: pytest.Pytester) -> None:
    """Longest first, each to the shard with the least work: the slow case has a shard of its
    own, the five quick ones share the other; a case the file does not know counts as the
    mean."""
    write(project, "s.eval.yaml", "\n".join(CASES.splitlines()[:8]) + "\n")
    taken = {"case-0": 60_000, **{f"case-{n}": 1_000 for n in range(1, 6)}}
    rows = [
        {"eval_id": case, "dataset": "s", "status": "graded", "score": 1.0, "duration_ms": ms}
        for case, ms in taken.items()
    ]
    write(project, "last.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    shards = [
        selected(project, "--agentv-shard-durations=last.jsonl", f"--agentv-shard={k}/2")
        for k in (1, 2)
    ]
    slow = [shard for shard in shards if "s.eval.yaml::case-0" in shard]
    assert slow == [["s.eval.yaml::case-0"]]
    [quick] = [shard for shard in shards if shard not in slow]
    assert quick == [f"s.eval.yaml::case-{n}" for n in range(1, 7)]


def test_a_bad_durations_file_is_a_usage_error_at_its_line(project: pytest.Pytester) -> None:
    write(project, "s.eval.yaml", CASES)
    write(project, "last.jsonl", '{"eval_id": "case-0", "score": 5}\n')
    result = project.runpytest("--agentv-shard=1/2", "--agentv-shard-durations=last.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agentv-shard-durations: last.jsonl:1: *score*"])


def test_xdist_workers_deal_the_same(suite: pytest.Pytester) -> None:
    """Each worker deals as a run alone does. The session (an inner ``-n 2`` costs two worker
    processes) runs with ``--dist loadfile`` and also holds, in the shard it is dealt to (whole:
    a case goes with the cases it depends on), tests/test_v4_suite_settings.py's
    ``DEPENDENCIES``, checked as its serial test checks it: under loadfile a file's cases stay
    in one worker, in their order (that test's [xdist] variant was a session of its own)."""
    write(suite, "deps/d.eval.yaml", DEPENDENCIES)
    [k] = [k for k, shard in enumerate(dealt(suite, 3), 1) if "deps/d.eval.yaml::parent" in shard]
    alone = selected(suite, f"--agentv-shard={k}/3")
    result = suite.runpytest(
        "-n", "2", "--dist", "loadfile", f"--agentv-shard={k}/3", "-p", "no:cacheprovider",
        "--junitxml=j.xml", "-rsf",
    )  # fmt: skip
    ran = ElementTree.parse(suite.path / "j.xml").iter("testcase")
    assert sorted(case.get("name") for case in ran) == sorted(n.rpartition("::")[2] for n in alone)
    assert_dependents_held(result, "deps/")


@pytest.mark.parametrize("value", ["0/4", "5/4", "2", "a/b", "1/0"])
def test_a_shard_that_is_not_k_of_n_is_a_usage_error(suite: pytest.Pytester, value: str) -> None:
    result = suite.runpytest(f"--agentv-shard={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--agentv-shard={value} is invalid: give K/N*"])


#: Twelve cases: every fourth fails.
MIXED = "tests:\n" + "".join(
    f"  - {{id: m{n}, input: q, assertions: [{{type: contains, value: "
    + ("nowhere" if n % 4 == 0 else "canned")
    + "}]}\n"
    for n in range(12)
)


def shard_results(project: pytest.Pytester, count: int) -> list[str]:
    """Run every shard of ``count``, each writing its results file; their names."""
    names = []
    for k in range(1, count + 1):
        names.append(f"s{k}.jsonl")
        project.inline_run(f"--agentv-shard={k}/{count}", f"--agentv-results={names[-1]}")
    return names


@pytest.fixture
def mixed(project: pytest.Pytester) -> pytest.Pytester:
    write(
        project,
        ".agentv/targets.yaml",
        "targets: [{name: default, provider: mock, response: canned}]\n",
    )
    write(project, "m.eval.yaml", MIXED)
    return project


def verdicts(path: Path) -> dict[str, object]:
    """Each case's verdict and score in a results file."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {row["eval_id"]: (row["verdict"], row["score"]) for row in rows}


def assert_merged_is_whole(project: pytest.Pytester, files: list[str]) -> None:
    """The shards' results ``files``, merged by ``report`` into ``all.jsonl``, are the single
    run's ``whole.jsonl``: each case's verdict and score, and the Markdown summary's totals (the
    same summary, but for which of equal failures it lists first). Both reports exit 1: cases
    failed."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(project.path)
        assert main(["report", *files, "--merge-to", "all.jsonl", "--markdown", "all.md"]) == 1
        assert main(["report", "whole.jsonl", "--markdown", "whole.md"]) == 1
    assert verdicts(project.path / "all.jsonl") == verdicts(project.path / "whole.jsonl")
    totals = [(project.path / name).read_text().splitlines()[2] for name in ("all.md", "whole.md")]
    assert totals[0] == totals[1]


def test_the_shards_merged_are_the_run_and_a_missing_or_doubled_shard_is_refused(
    mixed: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """One run of the whole and of each of its four shards: merged without one of them, or with
    one twice, ``report`` refuses and writes nothing; merged whole, they are the run."""
    mixed.inline_run("--agentv-results=whole.jsonl")
    files = shard_results(mixed, 4)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(mixed.path)
        assert main(["report", files[0], files[2], files[3], "--merge-to", "all.jsonl"]) == 2
        assert "no rows of shard 2/4: give every shard's results file" in capsys.readouterr().err
        assert main(["report", *files, files[1]]) == 2
        assert "a case is in two files: 'm" in capsys.readouterr().err
    assert not (mixed.path / "all.jsonl").exists()
    assert_merged_is_whole(mixed, files)
    assert "3 failed: " in capsys.readouterr().out
    assert len(verdicts(mixed.path / "all.jsonl")) == 12
    totals = (mixed.path / "all.md").read_text().splitlines()[2]
    assert totals.startswith("12 evaluations: 9 pass, 0 borderline, 3 fail")


def test_the_merged_run_has_the_gates_of_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A score that dropped beyond --max-regression fails the merged run, a borderline one does
    not, and --threshold moves every case's pass bar, as each does for a run."""

    def rows(name: str, shard: str | None, **scores: float) -> str:
        lines = [
            {"eval_id": case, "dataset": "d", "score": score, **({"shard": shard} if shard else {})}
            for case, score in scores.items()
        ]
        (tmp_path / name).write_text("".join(json.dumps(line) + "\n" for line in lines))
        return name

    monkeypatch.chdir(tmp_path)
    shards = [rows("a.jsonl", "1/2", x=0.9, y=1.0), rows("b.jsonl", "2/2", z=0.7)]
    rows("base.jsonl", None, x=1.0, y=1.0, z=0.7)
    assert main(["report", *shards, "--merge-to", "all.jsonl"]) == 0
    assert main(["report", *shards, "--baseline", "base.jsonl", "--max-regression", "0.05"]) == 1
    assert "1 regressed by more than 0.05: a.jsonl:1 (x)" in capsys.readouterr().out
    assert main(["report", *shards, "--threshold", "0.95", "--merge-to", "all.jsonl"]) == 0
    assert main(["report", *shards, "--threshold", "0.95", "--borderline", "fail"]) == 1
    assert "2 failed: a.jsonl:1 (x), b.jsonl:1 (z)" in capsys.readouterr().out
