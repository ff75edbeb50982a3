"""JavaScript's regular expressions (``new RegExp(pattern, flags)``, as AgentV v4's ``regex``
check builds them) translated for Python's ``regex`` module, which can stop a search after a
time limit.

The pattern is read as JavaScript reads it, without recursion: a pattern JavaScript refuses is
refused (``ValueError``, in JavaScript's words), and one it accepts keeps its meaning. Without
the ``u`` flag that is Annex B's lenient reading (``\\Z`` is the letter Z, ``]`` and ``{`` are
literal where they can be, ``\\8`` is the digit, ``\\c1`` a backslash and ``c1``) over UTF-16
code units: astral characters, in the pattern and in the text searched (``subject``), are their
two surrogates. ``\\d``, ``\\w``, ``\\b`` are ASCII (plus ``ſ`` and the Kelvin sign under
``iu``), ``\\s`` and line terminators are JavaScript's, a backreference to a group that did not
take part matches the empty string, ``[]``/``[^]`` match nothing/anything, and ``i`` folds case
as JavaScript does (simple case folding with ``u``, ``Canonicalize`` without).

Required repetitions cost the ``regex`` module memory as it compiles (``a{1000000000}`` takes
gigabytes), where JavaScript's engines answer at once: a pattern whose repetitions add up to
more than ``MAX_REPEAT_WORK`` is refused.
"""

from .text import subject
from .translator import MAX_REPEAT_WORK, translate

__all__ = ["MAX_REPEAT_WORK", "subject", "translate"]
