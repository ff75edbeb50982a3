"""``python -m pytest_agentv``: tools that work without a pytest run.

``schema eval|sidecar|targets`` prints the JSON Schema of eval files, of the sidecars of JSONL
datasets or of targets files, made from the models the loader validates with (so it cannot
drift from them). ``report RESULTS.jsonl...`` renders a results file (ours, AgentV v2.5.8's or a
later AgentV's), or the files of a run's shards as one run, as the HTML page and the Markdown
summary a run writes, optionally compared with a baseline results file, and exits as the run
would have: 1 when a case failed its gate.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from .schema.jsonschema import SCHEMA_KINDS, json_schema


def _report(args: argparse.Namespace) -> int:
    """0: every case passed its gate; 1: a case failed, was not graded or regressed beyond
    ``--max-regression`` (as a run fails); 2: the files could not be read as one run."""
    from .errors import AgentvError
    from .reports.rows import read_results

    try:
        with contextlib.ExitStack() as stack:
            merged = stack.enter_context(_written(args.merge_to)) if args.merge_to else None
            spool, facts, gate = read_results(
                args.results,
                args.baseline,
                threshold=args.threshold,
                max_regression=args.max_regression,
                borderline=args.borderline,
                merged=merged,
            )
    except (AgentvError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    written: list[str] = [str(args.merge_to)] if args.merge_to else []
    try:
        if args.markdown is not None:
            from .reports.markdown import markdown, write_markdown

            text = markdown(facts, spool.tally, spool.error)
            if str(args.markdown) == "-":
                sys.stdout.write(text)
            else:
                write_markdown(args.markdown, text)
                written.append(str(args.markdown))
        if args.output is not None or not (args.markdown or args.merge_to):
            from .reports.html import write_html

            page = args.output or Path("report.html")
            write_html(page, facts, spool)
            written.append(str(page))
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        spool.close()
    out = sys.stderr if str(args.markdown) == "-" else sys.stdout
    print(f"{', '.join(written) or 'read'}: {spool.tally.total_line()}", file=out)
    for label, cases in (
        ("failed", gate.failed),
        ("not graded", gate.not_graded),
        (f"regressed by more than {args.max_regression:g}", gate.regressed)
        if args.max_regression is not None
        else ("", []),
    ):
        if cases:
            more = f" and {len(cases) - 5} more" if len(cases) > 5 else ""
            print(f"{len(cases)} {label}: {', '.join(cases[:5])}{more}", file=out)
    return 1 if gate.failed or gate.not_graded or gate.regressed else 0


@contextlib.contextmanager
def _written(path: Path) -> Iterator[IO[str]]:
    """The merged results file: written whole, or not left behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    try:
        with partial.open("w", encoding="utf-8") as stream:
            yield stream
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not a number from 0 to 1")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_agentv", description="pytest-agentv tools"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    schema = commands.add_parser(
        "schema",
        help="print the JSON Schema of eval files, JSONL datasets' sidecars or targets files",
    )
    schema.add_argument("kind", choices=SCHEMA_KINDS)
    report = commands.add_parser(
        "report",
        help="render a results file (ours, AgentV v2.5.8's or v4's) as HTML or Markdown",
    )
    report.add_argument(
        "results",
        type=Path,
        nargs="+",
        help="the results file (JSON Lines); several: a run's shards, read as one run",
    )
    report.add_argument(
        "--baseline", type=Path, help="a previous results file to compare scores with"
    )
    report.add_argument(
        "--max-regression",
        type=_fraction,
        metavar="DROP",
        help="fail (exit 1) when a case's score dropped from the baseline by more than DROP",
    )
    report.add_argument(
        "--threshold",
        type=_fraction,
        help="the pass bar of every case's score, as --agentv-threshold sets it for a run",
    )
    report.add_argument(
        "--borderline",
        choices=("xfail", "fail", "pass"),
        default="xfail",
        help="what a borderline verdict is, as --agentv-borderline says for a run (fail: it "
        "fails the report's exit status)",
    )
    report.add_argument(
        "-o", "--output", "--html", type=Path, help="the HTML page to write (default: report.html)"
    )
    report.add_argument(
        "--markdown", type=Path, metavar="PATH", help="write the Markdown summary (-: stdout)"
    )
    report.add_argument(
        "--merge-to",
        type=Path,
        metavar="PATH",
        help="write every file's rows as one results file (the shards' run as one)",
    )
    args = parser.parse_args(argv)
    if args.command == "report":
        if args.max_regression is not None and args.baseline is None:
            parser.error("--max-regression needs --baseline, the results to compare with")
        return _report(args)
    json.dump(json_schema(args.kind), sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
