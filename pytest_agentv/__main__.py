"""``python -m pytest_agentv``: tools that work without a pytest run.

``schema eval|sidecar|targets`` prints the JSON Schema of eval files, of the sidecars of JSONL
datasets or of targets files, made from the models the loader validates with (so it cannot
drift from them). ``report RESULTS.jsonl`` renders a results file (ours, AgentV v2.5.8's or a
later AgentV's) as the HTML page or the Markdown summary a run writes, optionally compared with
a baseline results file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from .schema.jsonschema import SCHEMA_KINDS, json_schema


def _report(args: argparse.Namespace) -> int:
    from .errors import AgentvError
    from .reports.rows import read_results

    try:
        spool, facts = read_results(args.results, args.baseline)
    except AgentvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        if args.markdown is not None:
            from .reports.markdown import markdown, write_markdown

            text = markdown(facts, spool.tally, spool.error)
            if str(args.markdown) == "-":
                sys.stdout.write(text)
                return 0
            write_markdown(args.markdown, text)
            written = args.markdown
        else:
            from .reports.html import write_html

            written = args.output or Path("report.html")
            write_html(written, facts, spool)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        spool.close()
    print(f"{written}: {spool.tally.total_line()}")
    return 0


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
    report.add_argument("results", type=Path, help="the results file (JSON Lines)")
    report.add_argument(
        "--baseline", type=Path, help="a previous results file to compare scores with"
    )
    output = report.add_mutually_exclusive_group()
    output.add_argument(
        "-o", "--output", type=Path, help="the HTML page to write (default: report.html)"
    )
    output.add_argument(
        "--markdown",
        type=Path,
        metavar="PATH",
        help="write the Markdown summary instead (-: stdout)",
    )
    args = parser.parse_args(argv)
    if args.command == "report":
        return _report(args)
    json.dump(json_schema(args.kind), sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
