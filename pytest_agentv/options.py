"""Every option, declared once: ``--agentv-x`` on the command line, ``agentv_x`` in ini,
``AGENTV_X`` in the environment. The table is what the command line, the ini file, the help text
and the docs' option reference are made from; ``settings.py`` resolves it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pytest

BorderlineMode = Literal["xfail", "fail", "pass"]

DEFAULT_EVAL_PATTERNS = ("*.eval.yaml", "*.eval.yml", "*.eval.jsonl")
#: How a judge is asked for its reply's JSON Schema (``llm/structured.py``): ``auto``, then
#: the dialects in the order ``auto`` tries them.
STRUCTURED_CHOICES = ("auto", "json_schema", "json_object", "tools", "off")
#: The most trials one case may run (``--agentv-trials``, ``execution.trials``).
MAX_TRIALS = 1000


@dataclass(frozen=True)
class Option:
    name: str
    help: str
    kind: Literal["str", "int", "float", "bool", "choice", "list", "path", "prices"]
    default: Any = None
    choices: tuple[str, ...] = ()
    metavar: str | None = None

    @property
    def flag(self) -> str:
        return "--agentv-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return "agentv_" + self.name

    @property
    def env(self) -> str:
        return "AGENTV_" + self.name.upper()


OPTIONS: tuple[Option, ...] = (
    Option(
        "target",
        "Target to run every case against, overriding the eval files",
        "str",
        metavar="NAME",
    ),
    Option(
        "targets",
        "Targets file to use instead of the nearest .agentv/targets.yaml",
        "path",
        metavar="PATH",
    ),
    Option(
        "borderline",
        "Outcome of a borderline verdict (score 0.6-0.8)",
        "choice",
        "xfail",
        ("xfail", "fail", "pass"),
    ),
    Option(
        "results",
        "Write one JSON line per eval case (AgentV result fields) to PATH",
        "path",
        metavar="PATH",
    ),
    Option(
        "results_format",
        "Rows of --agentv-results: pytest-agentv's (AgentV v2.5.8's fields and ours) or AgentV "
        "v4's (test_id, scores, execution_status: what agentv compare reads)",
        "choice",
        "pytest-agentv",
        ("pytest-agentv", "agentv-v4"),
    ),
    Option(
        "html",
        "Write a self-contained HTML report of the run to PATH (every case, filterable)",
        "path",
        metavar="PATH",
    ),
    Option(
        "markdown",
        "Write a short Markdown summary of the run to PATH: totals, regressions, failures, cost",
        "path",
        metavar="PATH",
    ),
    Option(
        "keep_workspaces",
        "Keep the run's temporary workspaces after it ends: none, those of cases that did not "
        "pass (failed), or all (default: all when .agentv/config.yaml's "
        "execution.keep_workspaces is true, else none)",
        "choice",
        None,
        ("none", "failed", "all"),
    ),
    Option(
        "step_summary",
        "Append the Markdown summary to the file GITHUB_STEP_SUMMARY names, when it is set",
        "choice",
        "on",
        ("on", "off"),
    ),
    Option(
        "eval_patterns",
        "File name patterns collected as eval files",
        "list",
        DEFAULT_EVAL_PATTERNS,
        metavar="GLOB,...",
    ),
    Option(
        "code_judge_timeout",
        "Default code judge timeout in seconds",
        "float",
        60.0,
        metavar="SECONDS",
    ),
    Option(
        "code_judge_env",
        "Extra environment variables passed to code judges",
        "list",
        (),
        metavar="NAME,...",
    ),
    Option(
        "judge_model",
        "litellm model string of the LLM judge, e.g. openai/gpt-4o-mini",
        "str",
        metavar="MODEL",
    ),
    Option("judge_api_base", "Base URL of an OpenAI-compatible judge server", "str", metavar="URL"),
    Option(
        "judge_transport",
        "How model calls are sent: auto (openai/ and azure/ models on a lean HTTP client, the "
        "rest through litellm) or litellm (every model through litellm)",
        "choice",
        "auto",
        ("auto", "litellm"),
    ),
    Option(
        "judge_structured",
        "How the judge is asked for its reply's JSON Schema: json_schema (OpenAI's "
        "response_format), json_object (with a schema: llama-cpp-python's server), tools (a "
        "function call), off (the prompt alone), or auto (json_schema, and the next one for "
        "the rest of the run where a server refuses it); a judge target's structured wins",
        "choice",
        "auto",
        STRUCTURED_CHOICES,
    ),
    Option(
        "model_prices",
        "Prices of models in US dollars per million tokens, one 'MODEL INPUT OUTPUT' entry "
        "per line or between semicolons (0 0 for a local model); wins over litellm's price "
        "table, which prices a model only at its provider's own endpoint",
        "prices",
        (),
        metavar="MODEL IN OUT;...",
    ),
    Option(
        "judge_timeout",
        "Deadline in seconds for one judge call, retries included",
        "float",
        120.0,
        metavar="SECONDS",
    ),
    Option(
        "judge_attempt_timeout",
        "Seconds one judge request may take before it is abandoned and retried",
        "float",
        60.0,
        metavar="SECONDS",
    ),
    Option(
        "judge_retries",
        "Retries of a judge or LLM target call after a transient error",
        "int",
        4,
        metavar="N",
    ),
    Option(
        "judge_backoff",
        "Base delay in seconds of the judge retry backoff (doubles per retry)",
        "float",
        0.5,
        metavar="SECONDS",
    ),
    Option(
        "target_timeout",
        "Seconds a target may take to answer a case before the case is not graded (a CLI "
        "target's own timeout_seconds wins for it)",
        "float",
        300.0,
        metavar="SECONDS",
    ),
    Option(
        "require_judge",
        "Error instead of skip when a case needs an unconfigured judge",
        "bool",
        False,
    ),
    Option(
        "cache_mode",
        "Judge record/replay store mode",
        "choice",
        "readwrite",
        ("readwrite", "replay", "refresh", "off"),
    ),
    Option("cache_dir", "Folder of the judge record/replay store", "path", metavar="PATH"),
    Option(
        "concurrency",
        "Model calls in flight at once for the whole run (all pytest-xdist workers together; "
        "halved after a 429, then grown back), and child processes each process runs at once",
        "int",
        8,
        metavar="N",
    ),
    Option(
        "rpm",
        "Start at most N requests per minute to each model, for the whole run",
        "int",
        metavar="N",
    ),
    Option(
        "tpm",
        "Send at most N tokens per minute to each model, for the whole run (prompt and reply, "
        "counted as estimated until the model reports them)",
        "int",
        metavar="N",
    ),
    Option(
        "rate_window",
        "Seconds that --agentv-rpm, --agentv-tpm and the providers' per-minute limits count in "
        "(a minute; shorter in tests and benchmarks)",
        "float",
        60.0,
        metavar="SECONDS",
    ),
    Option(
        "fail_on_error",
        "Report cases that could not be graded as errors (no: as skips)",
        "bool",
        True,
    ),
    Option(
        "trials",
        "Run every eval case N times: the count of execution.trials (an adaptive case's max); "
        "cases without a trials block use pass_at_k; 1 runs every case once",
        "int",
        metavar="N",
    ),
    Option(
        "answers",
        "Answer every case from this previous results file (ours or AgentV's) instead of "
        "calling its target: re-grade recorded answers",
        "path",
        metavar="PATH",
    ),
    Option(
        "baseline",
        "Compare every case's score with a previous results file (ours or AgentV's): "
        "baseline_score and delta per case, and a comparison block in the summary",
        "path",
        metavar="PATH",
    ),
    Option(
        "max_regression",
        "Fail a case whose score dropped by more than D from --agentv-baseline, even if it "
        "still passes",
        "float",
        metavar="D",
    ),
    Option(
        "threshold",
        "The pass bar for every case (0 to 1): a score at or above it passes; wins over an eval "
        "file's execution.threshold (AgentV v4's --threshold)",
        "float",
        metavar="T",
    ),
    Option(
        "budget_usd",
        "Start no more model calls once the run has spent this many US dollars; the cases "
        "left are not graded and the run fails",
        "float",
        metavar="USD",
    ),
    Option(
        "shard",
        "Run shard K of N (K/N): a deterministic share of the selected tests, every test in "
        "exactly one shard; merge the shards' results with python -m pytest_agentv report",
        "str",
        metavar="K/N",
    ),
    Option(
        "shard_durations",
        "A previous results file whose durations balance the shards (greedy, longest first) "
        "instead of a hash of each test's id",
        "path",
        metavar="PATH",
    ),
    Option(
        "coordinator",
        "Hold --agentv-concurrency, --agentv-rpm, --agentv-tpm, the 429 back-off and "
        "--agentv-budget-usd across every process of every shard through this Redis "
        "(redis://[:PASSWORD@]HOST:PORT/DB; pip install pytest-agentv[redis])",
        "str",
        metavar="URL",
    ),
    Option(
        "run_id",
        "The run the shards belong to, for --agentv-coordinator: the same in every shard of one "
        "CI run, different between runs (default: GITHUB_RUN_ID-GITHUB_RUN_ATTEMPT)",
        "str",
        metavar="ID",
    ),
    Option(
        "estimate",
        "Print the model calls, tokens and cost the selected cases would need, then stop "
        "without running them (no model is called)",
        "bool",
        False,
    ),
    Option(
        "calibration",
        "Canary cases the judge must grade as expected before its verdicts are trusted "
        "(default: .agentv/calibration.yaml in the rootdir, when present)",
        "path",
        metavar="PATH",
    ),
    Option(
        "calibration_mode",
        "What a failed canary does: enforce (LLM-judged cases are not graded), warn (graded, "
        "with a warning) or off",
        "choice",
        "enforce",
        ("enforce", "warn", "off"),
    ),
)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("agentv", "AgentV eval files (pytest-agentv)")
    for option in OPTIONS:
        default = option.default
        if isinstance(default, tuple):
            default = ",".join(default) or "none"
        described = f"{option.help} (ini: {option.ini}, env: {option.env}, default: {default})"
        if option.kind == "bool":
            group.addoption(
                option.flag,
                dest=option.ini,
                nargs="?",
                const="true",
                default=None,
                metavar="yes|no",
                help=described,
            )
        else:
            group.addoption(
                option.flag,
                dest=option.ini,
                default=None,
                metavar=option.metavar or "|".join(option.choices),
                help=described,
            )
        parser.addini(option.ini, described, type="string", default="")
