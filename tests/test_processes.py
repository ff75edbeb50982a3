"""Code-judge processes: killed with their whole group on time, bounded output, scrubbed env."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pytest_agentv.processes import (
    MAX_STDOUT_BYTES,
    STDERR_TAIL_BYTES,
    USE_REAPER,
    ProcessResult,
    run_process,
)
from pytest_agentv.scheduler import shared_loop
from tests.helpers import recorded, still_running, write


def run(
    argv: list[str] | str, timeout: float = 1.0, stdin: bytes = b"{}", reaped: bool = True
) -> ProcessResult:
    coro = run_process(argv, stdin=stdin, timeout=timeout, cwd=Path.cwd(), reaped=reaped)
    return asyncio.run_coroutine_threadsafe(coro, shared_loop()).result(60)


@pytest.mark.skipif(not USE_REAPER, reason="the reaper runs on Linux only")
def test_only_a_reaped_child_has_the_reaper_between_it_and_pytest() -> None:
    """Our own short commands (git in the baseline repository) run without the reaper's
    process; their group is still theirs, killed whole when they time out."""
    parent = [sys.executable, "-c", "import os; print(os.getppid(), os.getpgid(0))"]
    reaped, direct = (run(parent, timeout=30, reaped=flag) for flag in (True, False))
    assert int(reaped.stdout.split()[0]) != os.getpid()
    assert int(direct.stdout.split()[0]) == os.getpid()
    assert int(direct.stdout.split()[1]) == direct.pid  # a group of its own
    hung = run([sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.2, reaped=False)
    assert hung.timed_out and hung.returncode == -signal.SIGTERM


@pytest.mark.skipif(not USE_REAPER, reason="the reaper runs on Linux only")
def test_reapers_come_from_one_server_which_is_started_again_when_it_dies(tmp_path: Path) -> None:
    """Each reaper is forked by this process's reaper server (a fork, where starting Python for
    each child cost some 15 ms of CPU). When the server dies, the children running under it are
    stopped with everything they started, and the next child gets a new server."""
    server_of = "cut -d' ' -f4 /proc/$PPID/stat"  # the parent of the child's reaper
    first, second = (int(run(server_of, timeout=30).stdout) for _ in range(2))
    assert first == second != os.getpid()
    assert psutil.Process(first).ppid() == os.getpid()
    sleeper = tmp_path / "sleeper"
    hung = asyncio.run_coroutine_threadsafe(
        run_process(f"sleep 30 & echo $! > {sleeper}; wait", timeout=60), shared_loop()
    )
    deadline = time.monotonic() + 30
    while not sleeper.exists() or not sleeper.read_text().endswith("\n"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(first, signal.SIGKILL)
    stopped = hung.result(60)
    assert stopped.returncode == -signal.SIGTERM and not stopped.timed_out
    assert still_running(recorded(sleeper)) == []
    assert int(run(server_of, timeout=30).stdout) not in (first, 0)
    assert zombie_children() == []


@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "direct"])
def test_a_child_that_cannot_start_raises_as_subprocess_does(tmp_path: Path, reaped: bool) -> None:
    """The reaper sends back why its child could not start: the folder, else the program."""
    (tmp_path / "plain.txt").write_text("not a program")
    cases = [
        (["no-such-program-here"], tmp_path, FileNotFoundError, "no-such-program-here"),
        (["./plain.txt"], tmp_path, PermissionError, "./plain.txt"),
        (["true"], tmp_path / "missing", FileNotFoundError, str(tmp_path / "missing")),
    ]
    for argv, cwd, error, named in cases:
        coro = run_process(argv, cwd=cwd, timeout=30, reaped=reaped)
        with pytest.raises(error) as raised:
            asyncio.run_coroutine_threadsafe(coro, shared_loop()).result(60)
        assert raised.value.filename == named


def test_a_child_given_no_folder_runs_in_the_current_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not in the folder that was current when the reaper server started."""
    run("true", timeout=30)
    monkeypatch.chdir(tmp_path)
    coro = run_process(["pwd"], timeout=30)
    result = asyncio.run_coroutine_threadsafe(coro, shared_loop()).result(60)
    assert result.stdout.decode().strip() == str(tmp_path)


@pytest.mark.skipif(not USE_REAPER, reason="the reaper runs on Linux only")
def test_a_child_starts_with_the_signals_a_direct_child_would_have() -> None:
    """Python ignores SIGPIPE and SIGXFSZ, and ignored signals survive exec: under the reaper,
    ``yes | head -1`` in a judge ended by a write error instead of SIGPIPE. Nothing is blocked
    either (the reaper blocks the signals it waits for)."""
    status = "grep -E '^Sig(Blk|Ign)' /proc/self/status"
    direct = subprocess.run(["/bin/sh", "-c", status], capture_output=True, check=True)
    assert run(status, timeout=30).stdout == direct.stdout
    ended = run("yes | head -n 1 >/dev/null; echo $?", timeout=30)
    assert ended.stdout == b"0\n" and ended.stderr_tail == b""


def group_members(pgid: int, within: float = 10.0) -> list[psutil.Process]:
    """Live members of a process group, after waiting up to ``within`` for the group to end."""
    deadline = time.monotonic() + within
    while True:
        found = []
        for process in psutil.process_iter():
            try:
                if os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE:
                    found.append(process)
            except (ProcessLookupError, psutil.Error):
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def zombie_children() -> list[psutil.Process]:
    return [c for c in psutil.Process().children() if c.status() == psutil.STATUS_ZOMBIE]


HANGERS = {
    "sleep": "sleep 30",
    "busy-loop": "while :; do :; done",
    "ignores-sigterm": "trap '' TERM; while :; do sleep 0.1; done",
    "never-reads-stdin": f"{sys.executable} -c 'import time; time.sleep(30)'",
    "grandchildren": "sleep 30 & sleep 30 & (sleep 30 &) ; wait",
    "double-fork": "( ( sleep 30 & ) & ) ; sleep 30",
    "floods-while-hung": "yes | head -c 100000; sleep 30",
}


@pytest.mark.parametrize("script", HANGERS.values(), ids=HANGERS.keys())
def test_hanging_judges_are_killed_with_their_group(script: str) -> None:
    payload = json.dumps({"candidate_answer": "x" * 2_000_000}).encode()
    started = time.monotonic()
    result = run(script, timeout=1.0, stdin=payload)
    elapsed = time.monotonic() - started
    assert result.timed_out
    assert elapsed < 20  # killed, not waited for: each would run 30 s or forever
    assert group_members(result.pid) == []
    assert zombie_children() == []


def test_children_left_behind_after_a_normal_exit_are_killed() -> None:
    result = run("sleep 30 & echo '{\"score\": 1}'", timeout=5)
    assert result.returncode == 0 and not result.timed_out
    assert json.loads(result.stdout) == {"score": 1}
    assert group_members(result.pid) == []
    if USE_REAPER:  # counted (for workspace hooks), and not left in the stderr shown
        assert result.left_behind == 1
        assert b"agentv-reaper" not in result.stderr_tail


def test_stdout_flood_is_capped_and_memory_stays_bounded() -> None:
    me = psutil.Process()
    before = me.memory_info().rss
    result = run(
        [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"], 10
    )
    assert not result.timed_out  # stopped at the cap, not by the 10 s timeout
    assert result.overflow == "stdout" and result.stdout == b""
    assert "wrote more than 1024 KiB to stdout" in (result.failure("code judge", 10) or "")
    assert me.memory_info().rss - before < 20 * MAX_STDOUT_BYTES
    assert group_members(result.pid) == []


def test_a_stderr_flood_is_stopped_at_its_cap_the_same_way_each_time() -> None:
    """200 MB on stderr was read to the deadline: a timeout on a busy machine, a success on an
    idle one."""
    flood = ["sh", "-c", "yes | head -c 200000000 >&2; echo done"]
    results = [run(flood, timeout=60) for _ in range(3)]
    assert [r.failure("hook", 60) for r in results] == [
        "hook wrote more than 16 MiB to stderr and was stopped"
    ] * 3
    assert [group_members(r.pid) for r in results] == [[]] * 3


def test_stderr_flood_keeps_the_tail_without_deadlock() -> None:
    script = (
        "import sys, json\n"
        "sys.stderr.write('e' * 5_000_000 + 'THE END')\n"
        "print(json.dumps({'score': 1}))\n"
    )
    result = run([sys.executable, "-c", script], timeout=10)
    assert result.returncode == 0
    assert len(result.stderr_tail) == STDERR_TAIL_BYTES
    assert result.stderr_tail.endswith(b"THE END")


CANARIES = {
    "OPENAI_API_KEY": "sk-canary-openai-0123456789abcdef",
    "ANTHROPIC_API_KEY": "sk-ant-canary-0123456789abcdef",
    "AWS_SECRET_ACCESS_KEY": "aws-canary-0123456789abcdef",
    "MY_TOKEN": "token-canary-0123456789abcdef",
    "X_PASSWORD": "password-canary-0123456789abcdef",
    "TEAM_SETTING": "team-setting-value",
}

ENV_DUMPER = """
import json, os, sys
environ = open("/proc/self/environ", "rb").read().decode(errors="replace")
seen = [name for name in os.environ] + [environ]
with open("seen-env.json", "w") as f:
    json.dump({"names": sorted(os.environ), "environ": environ}, f)
print(json.dumps({"score": 1}))
"""


def test_code_judges_get_a_scrubbed_environment(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    write(project, "dump_env.py", ENV_DUMPER)
    write(
        project,
        "e.eval.yaml",
        """
        evalcases:
          - id: env
            input: q
            evaluators: [{name: dump, type: code_judge, script: [python, dump_env.py]}]
        """,
    )
    project.runpytest("--agentv-code-judge-env=TEAM_SETTING").assert_outcomes(passed=1)
    seen = json.loads((project.path / "seen-env.json").read_text())
    for name, value in CANARIES.items():
        if name == "TEAM_SETTING":
            assert name in seen["names"] and value in seen["environ"]
        else:
            assert name not in seen["names"]
            assert value not in seen["environ"]
    assert "PATH" in seen["names"]


def test_where_tls_certificates_are_reaches_scripts(monkeypatch: pytest.MonkeyPatch) -> None:
    """``uv run`` in v4's sdk-python example could not reach its index behind a certificate
    authority of the machine's own: the variables that say where certificates are pass on."""
    from pytest_agentv.processes import scrubbed_env

    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"):
        monkeypatch.setenv(name, f"/etc/ca/{name}")
    monkeypatch.setenv("HTTPS_PROXY", "http://user:secret@proxy:3128")
    env = scrubbed_env()
    assert env["SSL_CERT_FILE"] == "/etc/ca/SSL_CERT_FILE"
    assert env["NODE_EXTRA_CA_CERTS"] == "/etc/ca/NODE_EXTRA_CA_CERTS"
    assert "HTTPS_PROXY" not in env  # a proxy's URL may hold its password: only when listed


def test_code_judge_cwd_may_not_leave_the_rootdir(project: pytest.Pytester) -> None:
    write(
        project,
        "c.eval.yaml",
        """
        evalcases:
          - id: escape
            input: q
            evaluators: [{name: j, type: code_judge, script: "pwd", cwd: ../..}]
        """,
    )
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*cwd reference '../..' resolves outside the rootdir; refused*"])


def test_environment_copy_survives_concurrent_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The threads switch every 10 µs rather than every 5 ms, so that a copy that is not safe
    fails within a few dozen calls (a plain ``dict(os.environ)`` did within 20, where at the
    default interval it took up to 3,000)."""
    import threading

    from pytest_agentv.processes import scrubbed_env
    from pytest_agentv.settings import environment

    stop = threading.Event()

    def toggle() -> None:
        while not stop.is_set():
            os.environ["AGENTV_TEST_TOGGLE"] = "1"
            os.environ.pop("AGENTV_TEST_TOGGLE", None)

    monkeypatch.delenv("AGENTV_TEST_TOGGLE", raising=False)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    thread = threading.Thread(target=toggle)
    thread.start()
    try:
        for _ in range(2_000):
            assert "PATH" in environment()
            scrubbed_env()
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)


ESCAPER = """
import json, os, subprocess, sys, time

def record(pid):
    with open(os.path.join("escapees", str(pid)), "w"):
        pass

# Three ways out of the process group: a new session, a new group, and a double fork.
record(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                        start_new_session=True).pid)
record(subprocess.Popen([sys.executable, "-c",
                         "import os, time; os.setpgid(0, 0); time.sleep(120)"]).pid)
ready, done = os.pipe()
if os.fork() == 0:
    if os.fork() == 0:
        record(os.getpid())
        os.write(done, b"x")
        time.sleep(120)
    os._exit(0)
os.read(ready, 1)
if os.path.exists("HANG"):
    open(os.path.join("hanging", str(os.getpid())), "w").close()
    time.sleep(120)
print(json.dumps({"text": "ok", "score": 1}))
"""


def escaper_project(project: pytest.Pytester, cases: int, hang: bool) -> None:
    write(project, "escaper.py", ESCAPER)
    (project.path / "escapees").mkdir()
    (project.path / "hanging").mkdir()
    write(
        project,
        ".agentv/targets.yaml",
        """
        targets:
          - name: default
            provider: mock
            response: ok
          - name: escaping-agent
            provider: cli
            command_template: python escaper.py
        """,
    )
    entries = "".join(
        f"  - id: judge-{i}\n    input: q\n    evaluators: "
        "[{name: esc, type: code_judge, script: [python, escaper.py]}]\n"
        f"  - id: agent-{i}\n    input: q\n    execution: {{target: escaping-agent}}\n"
        "    evaluators: [{name: kw, type: code_judge, script: [python, keywords.py]}]\n"
        for i in range(cases)
    )
    write(project, "e.eval.yaml", "evalcases:\n" + entries)
    project.makeini(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
        f"agentv_concurrency = {2 * cases}\n"
    )
    if hang:
        (project.path / "HANG").touch()


def test_descendants_that_left_the_group_die_with_a_normal_end(project: pytest.Pytester) -> None:
    """setsid, setpgid(0, 0) and a double fork escaped the group kill: 4 code-judge and 3
    CLI-target survivors in one run. No process a judge or an agent starts outlives its call."""
    escaper_project(project, cases=2, hang=False)
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    pids = recorded(project.path / "escapees")
    assert len(pids) == 4 * 3
    assert still_running(pids, within=30) == []


def test_a_command_cancelled_while_it_starts_leaves_nothing_running(tmp_path: Path) -> None:
    """Cancelled while asyncio still connects the child's pipes (a busy loop: the run ended
    under -x while a healthcheck started), asyncio kills the child alone; the command it runs
    through ``sh -c`` lived on. The whole group goes."""
    pid_file = tmp_path / "cmd.pid"

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        real = loop.subprocess_exec

        async def slow_to_connect(*args: object, **kwargs: object) -> object:
            spawned = await real(*args, **kwargs)  # type: ignore[arg-type]
            while not pid_file.exists() or not pid_file.read_text():
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)
            return spawned

        loop.subprocess_exec = slow_to_connect  # type: ignore[method-assign,assignment]
        script = tmp_path / "cmd.py"
        script.write_text(
            f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
            "time.sleep(60)\n"
        )
        command = f"{sys.executable} {script}"
        task = asyncio.ensure_future(run_process(command, timeout=60))
        while not pid_file.exists() or not pid_file.read_text():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert still_running(recorded(pid_file)) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_no_descendant_outlives_a_terminated_or_killed_run(
    project: pytest.Pytester, sig: signal.Signals
) -> None:
    """kill -TERM of pytest (timeout, docker stop, CI cancellation) used to exit at once and
    leave every judge and agent running; so did SIGKILL."""
    escaper_project(project, cases=2, hang=True)
    junit = project.path / "junit.xml"
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={junit}"],
        cwd=project.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ},
    )
    try:
        deadline = time.monotonic() + 60
        while len(list((project.path / "hanging").iterdir())) < 4:
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        hanging = recorded(project.path / "hanging")
        escapees = recorded(project.path / "escapees")
        assert len(escapees) == 4 * 3
        process.send_signal(sig)
        output = process.communicate(timeout=60)[0].decode()
    finally:
        if process.poll() is None:
            process.kill()
    assert still_running(hanging + escapees, within=30) == []
    if sig == signal.SIGTERM:
        # Like Ctrl-C: pytest reports the interruption and still writes its reports.
        assert process.returncode == pytest.ExitCode.INTERRUPTED, output
        assert "KeyboardInterrupt" in output
        assert junit.exists()
    else:
        assert process.returncode == -signal.SIGKILL
