"""Which data files a query must read, from the published statistics: filter, membership,
LIMIT and top-k pruning (pruning.plan), over predicates in three-valued logic
(pruning.evaluator)."""
from lakestats.pruning.plan import PruneResult, prune
from lakestats.pruning.predicate import PredicateError, parse_order

__all__ = ["PredicateError", "PruneResult", "parse_order", "prune"]
