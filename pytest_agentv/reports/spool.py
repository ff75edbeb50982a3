"""The rows of a run, kept on disk until its reports are written.

The HTML report shows every case in full (prompts, answers, judges' reasoning), but pytest
keeps every report until the session ends and a run may have 10,000 cases: rows go to a
temporary JSON Lines file as they arrive, with only their place and order kept in memory, and
are read back one at a time while the page is written.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Mapping
from typing import IO, Any

from .jsonl import compact_json
from .view import Tally, shown_row


class RowSpool:
    """Rows on disk, read back in the order of their eval files and lines."""

    def __init__(self) -> None:
        self._file: IO[str] | None = None
        #: (file, line, arrival) and where the row starts, for each row.
        self._index: list[tuple[tuple[str, int, int], int]] = []
        self.tally = Tally()
        #: Why rows could not be kept (a full disk): the reports then say so.
        self.error: str | None = None

    def add(self, raw: Mapping[str, Any]) -> None:
        """Keep a row as reports show it (see ``shown_row``)."""
        row = shown_row(raw)
        self.tally.add(row)
        if self.error is not None:
            return
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile("w+", encoding="utf-8", prefix="agentv-rows-")
            offset = self._file.seek(0, 2)
            self._file.write(compact_json(row) + "\n")
        except OSError as exc:
            self.error = f"the rows of the run could not be kept for the report: {exc}"
            return
        line = row.get("line")
        order = (str(row.get("file") or ""), line if isinstance(line, int) else 0, len(self._index))
        self._index.append((order, offset))

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every row, by eval file and line (rows without a file first, as they came)."""
        if self._file is None:
            return
        self._file.flush()
        for _, offset in sorted(self._index):
            self._file.seek(offset)
            row: dict[str, Any] = json.loads(self._file.readline())
            yield row

    def __len__(self) -> int:
        return len(self._index)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
