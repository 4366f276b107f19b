"""Best-first proof search (``burnqed.search``): the engine, its tree, the value-model interface,
and the search stage (``run``, ``burnqed search``).  Importing this package is light; the stage's
heavy dependencies (policy backends, the Lean pool) load only when ``stage.run`` is called.

Example::

    >>> from burnqed.search import SearchResult, search_all
    >>> callable(search_all)
    True
"""

from burnqed.search.engine import ProofEnvironment, SearchResult, search_all
from burnqed.search.tree import InvariantError, Node, SearchTree
from burnqed.search.value import ValueModel, priority

__all__ = [
    "InvariantError",
    "Node",
    "ProofEnvironment",
    "SearchResult",
    "SearchTree",
    "ValueModel",
    "priority",
    "search_all",
]
