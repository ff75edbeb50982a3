"""What AgentV v4 writes, written as v4 writes it: result rows (``rows.py``), the run folder
(``run_folder.py``: ``index.jsonl``, ``benchmark.json``, each test's ``grading.json``,
``timing.json`` and ``outputs/``), each test's trace envelope (``trace.py``) and the transcript
projected from it (``transcript.py``), with v4's ids (``identity.py``)."""
