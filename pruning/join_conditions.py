"""The conditions of a query block as the join-graph walk (pruning.join_extract) reads them:
conjuncts and disjuncts, what an OR of conjunctions implies, which source a condition names,
and whether it rejects null-extended rows."""
from __future__ import annotations

from sqlglot import exp

from lakestats.pruning.evaluator import evaluate_one
from lakestats.pruning.predicate import StatsView

Scope = dict          # alias -> a FROM item of the block


def conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        return []
    if isinstance(node, (exp.Where, exp.Having, exp.Paren)):
        return conjuncts(node.this)
    if isinstance(node, exp.And):
        return conjuncts(node.left) + conjuncts(node.right)
    return [node]


def disjuncts(node: exp.Expression) -> list[exp.Expression]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Or):
        return disjuncts(node.left) + disjuncts(node.right)
    return [node]


def implied(disjunction: exp.Expression, scope: Scope) -> list[exp.Expression]:
    """What an OR of conjunctions implies, as Spark's optimizer extracts it: the conjuncts
    every branch holds (a join condition written in each), and per source the OR of each
    branch's conjuncts on that source alone, when every branch has some."""
    branches = [[c for c in conjuncts(b) if not c.find(exp.Subquery, exp.Exists, exp.Select)]
                for b in disjuncts(disjunction)]
    common = [c for c in branches[0] if all(any(same(c, d) for d in b) for b in branches[1:])]
    aliases = {single_source(c, [scope]) for c in branches[0]} - {None}
    for alias in sorted(aliases):
        parts = [[c for c in b if single_source(c, [scope]) == alias
                  and not any(same(c, i) for i in common)] for b in branches]
        if all(parts):
            common.append(exp.or_(*[exp.and_(*p) for p in parts]))
    return common


def same(a: exp.Expression, b: exp.Expression) -> bool:
    """Equal expressions, `x = y` and `y = x` alike."""
    return a == b or isinstance(a, exp.EQ) and isinstance(b, exp.EQ) and \
        a.left == b.right and a.right == b.left


def single_source(conjunct: exp.Expression, scopes: list[Scope]) -> str | None:
    """The one source alias a conjunct's columns all name (in the first scope), else None."""
    tables = {c.table for c in conjunct.find_all(exp.Column)}
    if len(tables) != 1:
        return None
    alias = next(iter(tables))
    return alias if alias in scopes[0] else None


def null_rejecting(predicate: exp.Expression) -> bool:
    """Cannot be true when every column is null (a null-extended row fails it)."""
    columns = {c.name for c in predicate.find_all(exp.Column)}
    nulls = StatsView({c: {"row_count": 1, "null_count": 1, "nan_count": 0, "low": None,
                           "high": None} for c in columns}, 1, columns)
    return not evaluate_one(predicate, nulls).true
