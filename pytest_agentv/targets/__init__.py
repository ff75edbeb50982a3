"""Where candidate answers come from: the targets.

``base.py`` is what a target is (the ``Target`` protocol; ``TargetDefinition``, what a kind is
built from and what the ``pytest_agentv_make_target`` hook is given); ``catalog.py`` finds a
case's target in its targets file, follows ``use_target`` and resolves ``${{ VAR }}``;
``kinds.py`` is the table of built-in kinds. One module per kind: ``mock``, ``cli`` (one command
per case, with its healthcheck), ``batch`` (one command per eval file), ``model`` (LLM
providers), and, not from a targets file, ``fixture`` (the ``agentv_target`` fixture) and
``recorded`` (``--agentv-answers``).
"""

from __future__ import annotations

from .base import Target, TargetDefinition, TargetServices, planned_answer
from .catalog import TargetCatalog
from .kinds import TARGET_KINDS, builtin_target, known_providers

__all__ = [
    "TARGET_KINDS",
    "Target",
    "TargetCatalog",
    "TargetDefinition",
    "TargetServices",
    "builtin_target",
    "known_providers",
    "planned_answer",
]
