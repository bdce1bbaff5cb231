"""A SQL query's join graph (pruning.join_graph), as Spark would see it after decorrelation.

The query is parsed and its columns qualified by sqlglot (Spark dialect, no JVM), then walked
block by block:

- Local predicates are the conjuncts of WHERE and ON that name one table's columns, where they
  filter it: ON conjuncts only on the side an outer join does not preserve, WHERE conjuncts on
  a null-supplying side only when they are null-rejecting; HAVING conjuncts on grouping
  columns alone count as WHERE ones. An OR of conjunctions implies the conjuncts every branch
  holds and, per table, the OR of its own conditions.
- A parenthesized join, `a LEFT JOIN (b JOIN c ON ...) ON ...`, is one side of the join whose
  tables the block sees.
- Subqueries are joins as Spark decorrelates them: `EXISTS` and `IN (subquery)` semi joins,
  `NOT EXISTS` and `NOT IN` anti joins, a correlated scalar subquery (or an EXISTS over an
  aggregate without GROUP BY) a left outer join from the outer block; correlations with the
  immediately enclosing block only.
- A block's output column comes from scan columns through plain projections and renames,
  through GROUP BY on grouping columns only (no ROLLUP, CUBE or grouping sets), and through
  UNION as OR (every branch). Blocks with LIMIT, window functions, sampling, INTERSECT or
  EXCEPT, and PIVOT's sources, let nothing in or out. What the walk does not understand never
  prunes: its conjuncts are dropped, never guessed, and a table it does not reach is a scan
  of every file.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.qualify import qualify

from lakestats.pruning.join_graph import (ANTI, FULL, INNER, LEFT, NOT_IN, RIGHT, SEMI, Edge,
                                          JoinGraph, Origin, Scan)
from lakestats.pruning.join_conditions import conjuncts, implied, null_rejecting, single_source
from lakestats.pruning.predicate import PredicateError, as_spark_reads


def parse(sql: str) -> exp.Expression:
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except SqlglotError as e:
        raise PredicateError(f"query does not parse: {str(e).splitlines()[0]}") from None
    if not isinstance(tree, exp.Query):
        raise PredicateError("not a query: expected SELECT ...")
    return as_spark_reads(tree)


def tables_named(tree: exp.Expression, given: list[str], others: Iterable[str] = ()
                 ) -> list[str]:
    """The given tables the query names (Spark's names are case-insensitive); an error names
    a table the query reads that is neither given nor one of the `others`."""
    return sorted({name for _, name in _references(tree, given, others)})


def unnamed(tree: exp.Expression, given: list[str]) -> list[str]:
    """The tables the query reads that are not given (nor qualified by a database)."""
    known = {t.lower() for t in given} | _cte_names(tree)
    return sorted({t.name for t in tree.find_all(exp.Table)
                   if not t.args.get("db") and t.name.lower() not in known})


def _cte_names(tree: exp.Expression) -> set[str]:
    return {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}


def _references(tree: exp.Expression, given: list[str], others: Iterable[str] = ()
                ) -> list[tuple[exp.Table, str]]:
    """Each table node of the query that reads a given table, with the table's given name."""
    by_name = {t.lower(): t for t in given}
    skipped = _cte_names(tree) | {t.lower() for t in others}
    found = []
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        if name in skipped or table.args.get("db"):
            continue
        if name not in by_name:
            raise PredicateError(f"table {table.name!r} is in the query but not given "
                                 f"(given: {', '.join(sorted(given)) or 'none'})")
        found.append((table, by_name[name]))
    return found


def extract(tree: exp.Expression, schemas: dict[str, list[str]],
            others: dict[str, list[str]] | None = None) -> JoinGraph:
    """The join graph of a parsed query over tables named as in `schemas` (name -> column
    names); `others` are tables it may also read (name -> columns), opaque: never pruned,
    never a source of diPs."""
    others = others or {}
    references = _references(tree, list(schemas), others)
    for i, table in enumerate(tree.find_all(exp.Table)):
        table.meta["scan"] = i
    try:
        qualified = qualify(tree.copy(), schema={t: {c: "string" for c in cols}
                                                 for t, cols in {**others, **schemas}.items()},
                            dialect="spark")
    except (OptimizeError, SqlglotError) as e:
        raise PredicateError(f"query: {str(e).splitlines()[0]}") from None
    walk = _Walk({t.lower(): t for t in schemas},
                 {t.lower(): {c.lower(): c for c in cols} for t, cols in schemas.items()})
    walk.query(qualified, [], {})
    # a reference the walk did not reach (a construct it does not know): read whole
    walked = {s.reference for s in walk.scans}
    for table, name in references:
        if table.meta["scan"] not in walked:
            walk.scans.append(Scan(len(walk.scans), name, table.alias_or_name, table.meta["scan"]))
    return JoinGraph(walk.scans, walk.edges, tree)


# -- the walk


@dataclass
class _Source:
    """A FROM item of a block: output column -> its origins (None: computed, opaque)."""
    columns: dict[str, list[Origin] | None]
    scan: Scan | None = None
    nullable: bool = False

    def origins(self, column: str) -> list[Origin] | None:
        found = self.columns.get(column)
        if found is None:
            return None
        return [Origin(o.scan, o.column, o.nullable or self.nullable) for o in found]


_Scope = dict[str, _Source]        # alias -> source, one block


class _Walk:
    def __init__(self, tables: dict[str, str], columns: dict[str, dict[str, str]]):
        self.tables, self.columns = tables, columns
        self.scans: list[Scan] = []
        self.edges: list[Edge] = []
        self.walked: set[int] = set()        # query nodes walked (each subquery once)

    # a query: SELECT, set operations, parentheses; returns its output columns, in order
    def query(self, node: exp.Expression, outer: list[_Scope], ctes: dict[str, exp.Expression],
              correlation: str | None = None) -> list[tuple[str, list[Origin] | None]]:
        ctes = {**ctes, **{c.alias_or_name.lower(): c.this for c in _arg(node, "with").expressions}} \
            if _arg(node, "with") else ctes
        self.walked.add(id(node))
        if isinstance(node, exp.Subquery):
            return self.query(node.this, outer, ctes, correlation)
        if isinstance(node, exp.Select):
            return self.select(node, outer, ctes, correlation)
        if isinstance(node, exp.SetOperation):
            left = self.query(node.left, outer, ctes)
            right = self.query(node.right, outer, ctes)
            if not isinstance(node, exp.Union) or len(left) != len(right):
                return [(name, None) for name, _ in left]
            return [(name, a + b if a is not None and b is not None else None)
                    for (name, a), (_, b) in zip(left, right)]
        return []

    def select(self, node: exp.Select, outer: list[_Scope], ctes, correlation):
        if correlation == SEMI and (node.args.get("having") or _scalar_aggregate(node)):
            # a row whatever the outer row (or none when rows match): outer to inner only
            correlation = LEFT
        scope: _Scope = {}
        first = _arg(node, "from")
        if first is not None:
            self.sources(first.this, scope, outer, ctes)
        for join in node.args.get("joins") or []:
            self.join(join, scope, outer, ctes)
        for conjunct in conjuncts(node.args.get("where")):
            self.where(conjunct, scope, outer, ctes, correlation)
        # HAVING on grouping columns alone drops whole groups: as WHERE would (Spark pushes it)
        keys = _grouping_keys(node)
        for conjunct in conjuncts(node.args.get("having")) if keys else []:
            columns = list(conjunct.find_all(exp.Column))
            if columns and all((c.table, c.name.lower()) in keys for c in columns) and \
                    not conjunct.find(exp.AggFunc, exp.Subquery, exp.Exists, exp.Window):
                self.where(conjunct, scope, outer, ctes, None)
        # subqueries anywhere else (select list, HAVING, under OR): their scans, no edges out
        for sub in list(node.find_all(exp.Select)):
            if sub is not node and id(sub) not in self.walked and _block_of(sub) is node:
                self.query(sub, [scope, *outer], ctes)
        return self.outputs(node, scope)

    def source(self, node: exp.Expression, outer, ctes) -> _Source:
        if isinstance(node, exp.Table) and not node.args.get("db"):
            name = node.name.lower()
            if name in ctes:                   # walked per reference; a recursive one opaque
                body = ctes[name]
                return _Source({} if body is None else dict(
                    self.query(body, outer, {**ctes, name: None})))
            if name in self.tables:
                scan = Scan(len(self.scans), self.tables[name], node.alias_or_name,
                            node.meta["scan"])
                self.scans.append(scan)
                return _Source({c: [Origin(scan.id, real)]
                                for c, real in self.columns[name].items()}, scan)
        if isinstance(node, exp.Subquery):
            return _Source(dict(self.query(node.this, outer, ctes)))
        return _Source({})          # a table function, VALUES, ...: opaque

    def sources(self, node: exp.Expression, scope: _Scope, outer, ctes) -> set[str]:
        """Adds a FROM item's sources to the scope: one, or the tables of a parenthesized join
        `(a JOIN b ON ...)`, whose aliases the enclosing block sees. Returns their aliases."""
        nested = node.this if isinstance(node, exp.Subquery) and not node.alias else None
        if isinstance(nested, (exp.Table, exp.Subquery)) and nested.args.get("joins"):
            group: _Scope = {}
            self.sources(nested, group, outer, ctes)
            for join in nested.args["joins"]:
                self.join(join, group, outer, ctes)
            scope.update(group)
            return set(group)
        source = self.source(node, outer, ctes)
        if node.args.get("pivots"):     # its columns are those of a PIVOT or UNPIVOT: opaque
            source = _Source({}, source.scan)
        scope[node.alias_or_name] = source
        return {node.alias_or_name}

    def join(self, join: exp.Join, scope: _Scope, outer, ctes) -> None:
        left = set(scope)
        right = self.sources(join.this, scope, outer, ctes)
        side, kind = (join.side or "").upper(), (join.kind or "").upper()
        join_type = {"SEMI": SEMI, "ANTI": ANTI}.get(kind) or \
            {"LEFT": LEFT, "RIGHT": RIGHT, "FULL": FULL}.get(side, INNER)
        # the sides whose rows ON filters: those the join does not preserve
        filtered = {INNER: left | right, SEMI: left | right, ANTI: right, LEFT: right,
                    RIGHT: left, FULL: set()}[join_type]
        for conjunct in conjuncts(join.args.get("on")):
            pair = self.equi(conjunct, [scope])
            if pair is not None:
                (a, oa), (b, ob) = pair
                if a in left and b in right:
                    self.edge(oa, ob, join_type)
                elif b in left and a in right:
                    self.edge(ob, oa, join_type)
                continue
            only = single_source(conjunct, [scope])
            if only in filtered:
                self.local(conjunct, scope, only, scope[only].nullable)
        # after ON: a join's own condition filters the side it makes null-supplying
        if join_type in (LEFT, FULL):
            for a in right:
                scope[a].nullable = True
        if join_type in (RIGHT, FULL):
            for a in left:
                scope[a].nullable = True

    def where(self, conjunct: exp.Expression, scope: _Scope, outer, ctes, correlation,
              factored: bool = False) -> None:
        while isinstance(conjunct, exp.Paren):
            conjunct = conjunct.this
        if isinstance(conjunct, exp.Or) and not factored:
            for condition in implied(conjunct, scope):
                self.where(condition, scope, outer, ctes, None, factored=True)
            return
        negated = isinstance(conjunct, exp.Not)
        atom = conjunct.this if negated else conjunct
        inner = [scope, *outer]
        if isinstance(atom, exp.Exists):
            self.query(atom.this, inner, ctes, ANTI if negated else SEMI)
            return
        if isinstance(atom, exp.In) and isinstance(atom.args.get("query"), exp.Expression):
            query = atom.args["query"]
            kind = NOT_IN if negated else SEMI
            out = self.query(query, inner, ctes, ANTI if negated else SEMI)
            probe = self.origins(atom.this, [scope])
            if probe and len(out) == 1 and out[0][1]:
                self.edge(probe, out[0][1], kind)
            return
        if not negated and isinstance(atom, (exp.EQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NEQ)):
            for side in (atom.left, atom.right):
                if isinstance(side, exp.Subquery):      # a scalar subquery: a left outer join
                    self.query(side.this, inner, ctes, LEFT)
        if correlation is not None and outer:
            pair = self.equi(conjunct, [scope, outer[0]])
            if pair is not None:
                (a, oa), (b, ob) = pair
                if a in scope and b not in scope:
                    self.edge(ob, oa, correlation)
                elif b in scope and a not in scope:
                    self.edge(oa, ob, correlation)
        if conjunct.find(exp.Subquery, exp.Exists, exp.Select):
            return
        pair = self.equi(conjunct, [scope])
        if pair is not None and pair[0][0] != pair[1][0]:
            self.edge(pair[0][1], pair[1][1], INNER)
            return
        only = single_source(conjunct, [scope])
        if only is not None:
            self.local(conjunct, scope, only, scope[only].nullable)

    def equi(self, conjunct: exp.Expression, scopes: list[_Scope]):
        """`a.x = b.y` between two sources: ((alias, origins), (alias, origins)), else None."""
        if not (isinstance(conjunct, exp.EQ) and isinstance(conjunct.left, exp.Column)
                and isinstance(conjunct.right, exp.Column)):
            return None
        sides = []
        for column in (conjunct.left, conjunct.right):
            origins = self.origins(column, scopes)
            if not origins:
                return None
            sides.append((column.table, origins))
        return sides if sides[0][0] != sides[1][0] else None

    def origins(self, node: exp.Expression, scopes: list[_Scope]) -> list[Origin] | None:
        if not isinstance(node, exp.Column):
            return None
        for scope in scopes:
            if node.table in scope:
                return scope[node.table].origins(node.name.lower())
        return None

    def edge(self, left: list[Origin], right: list[Origin], kind: str) -> None:
        self.edges.append(Edge(tuple(left), tuple(right), kind))

    def local(self, conjunct: exp.Expression, scope: _Scope, alias: str,
              null_rejecting_needed: bool) -> None:
        """A conjunct on one source's columns: a local predicate of the scans it comes from
        (renamed through the blocks between), when every column comes from one scan column
        per branch."""
        columns = list(conjunct.find_all(exp.Column))
        origins = [scope[alias].origins(c.name.lower()) for c in columns]
        if not columns or any(o is None for o in origins):
            return
        scans = {o.scan for found in origins for o in found}
        for scan_id in scans:
            renamed = conjunct.copy()
            mapping = []
            for column, found in zip(list(renamed.find_all(exp.Column)), origins):
                mine = [o for o in found if o.scan == scan_id]
                if len(mine) != 1:
                    break
                mapping.append((column, mine[0]))
            else:
                nullable = null_rejecting_needed or any(o.nullable for _, o in mapping)
                for column, origin in mapping:
                    column.replace(exp.column(origin.column, quoted=True))
                if nullable and not null_rejecting(renamed):
                    continue
                next(s for s in self.scans if s.id == scan_id).predicates.append(renamed)

    def outputs(self, node: exp.Select, scope: _Scope) -> list[tuple[str, list[Origin] | None]]:
        opaque = node.args.get("limit") or node.args.get("offset") or node.find(exp.Window) \
            or node.args.get("sample")
        keys = _grouping_keys(node)
        aggregated = node.args.get("group") is not None or _scalar_aggregate(node)
        out = []
        for e in node.expressions:
            inner = e.this if isinstance(e, exp.Alias) else e
            origins = None
            if not opaque and isinstance(inner, exp.Column) and (
                    not aggregated or (inner.table, inner.name.lower()) in keys):
                origins = self.origins(inner, [scope])
            out.append((e.alias_or_name.lower(), origins))
        return out


def _grouping_keys(node: exp.Select) -> set[tuple[str, str]]:
    """The (source, column) pairs a block groups by as plain columns; none under ROLLUP, CUBE
    or grouping sets, where grouping columns turn null. GROUP BY ALL groups by every select
    expression without an aggregate."""
    grouped = node.args.get("group")
    if grouped is None or any(grouped.args.get(k) for k in (
            "rollup", "cube", "grouping_sets", "totals")):
        return set()
    keys = grouped.expressions
    if grouped.args.get("all"):
        keys = [e.unalias() for e in node.expressions if not e.find(exp.AggFunc)]
    return {(c.table, c.name.lower()) for c in keys if isinstance(c, exp.Column)}


def _scalar_aggregate(node: exp.Select) -> bool:
    """Aggregates without GROUP BY: one row, whatever the rows."""
    return node.args.get("group") is None and any(e.find(exp.AggFunc) for e in node.expressions)


def _arg(node: exp.Expression, name: str):
    """An argument by its name across sqlglot versions (`from`/`from_`, `with`/`with_`)."""
    return node.args.get(f"{name}_") or node.args.get(name)


def _block_of(node: exp.Expression) -> exp.Select | None:
    """The SELECT whose clauses hold `node` (not counting node itself)."""
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Select):
        parent = parent.parent
    return parent
