"""Best-first proof search (``burnqed.search``): the engine, its tree, the answer sources (live, a
recorded tree: ``sources``, ``recorded``), the value-model interface, and the search stage
(``run``, ``burnqed search``).  Importing this package is light; the stage's heavy dependencies
(policy backends, the Lean pool, a recording's Parquet) load only when used.

Example::

    >>> from burnqed.search import SearchResult, search_all
    >>> callable(search_all)
    True
"""

from burnqed.search.engine import ProofEnvironment, SearchResult, search_all, search_from_source
from burnqed.search.sources import AnswerSource, ExpandRequest, LiveSource
from burnqed.search.tree import InvariantError, Node, SearchTree
from burnqed.search.value import ValueModel, priority

__all__ = [
    "AnswerSource",
    "ExpandRequest",
    "InvariantError",
    "LiveSource",
    "Node",
    "ProofEnvironment",
    "SearchResult",
    "SearchTree",
    "ValueModel",
    "priority",
    "search_all",
    "search_from_source",
]
