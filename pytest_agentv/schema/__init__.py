"""The pydantic models of the files pytest-agentv reads, one module per concept: ``evalfile``
(the suite and its cases), ``messages``, ``rubrics``, ``evaluators`` (entries, composites),
``checks`` (the settings of tool trajectories, fields, latency, cost and token usage),
``trials``, ``targets``, ``project`` (``.agentv/config.yaml``, calibration canaries), and
``jsonschema``, their JSON Schema.

Field names follow AgentV v2.5.8; every other version's spelling is read too (``spellings.py``).
Unknown keys are kept (``extra="allow"``) so that the loader can warn about them with a line
number instead of rejecting real-world files.
"""
