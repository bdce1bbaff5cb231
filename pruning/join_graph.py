"""The join graph of a query: its table scans, each scan's local predicates, and the
equi-join edges between scans along which data-induced predicates may travel
(pruning.join_extract builds it from SQL).

- A scan is one reference to a table (a table read twice is two scans).
- An edge joins two column endpoints with a join type. Inner and semi joins pass diPs both ways;
  an outer join only from its preserved side; an anti join only from left to right (NOT IN, a
  null-aware anti join, only while no left row has a null key: pruning.joins checks that);
  a full outer join passes nothing.
- An endpoint is the list of scan columns a block's output column comes from (several through
  a UNION: a diP from it is the OR of theirs, a diP to it prunes each).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

INNER, SEMI, ANTI, NOT_IN, LEFT, RIGHT, FULL = \
    "inner", "semi", "anti", "null-aware anti", "left outer", "right outer", "full outer"
# join type -> (passes left to right, passes right to left)
DIRECTIONS = {INNER: (True, True), SEMI: (True, True), ANTI: (True, False),
              NOT_IN: (True, False), LEFT: (True, False), RIGHT: (False, True),
              FULL: (False, False)}


@dataclass(frozen=True)
class Origin:
    """A scan's column that a block's output column comes from; `nullable` when it lies on the
    null-supplying side of an outer join on the way up."""
    scan: int
    column: str
    nullable: bool = False


@dataclass
class Scan:
    id: int
    table: str                     # the table's name in the query
    alias: str
    # the table reference in the query it reads through (JoinGraph.tree's meta["scan"]): a
    # common table expression named twice is walked twice, its tables once in the text
    reference: int
    predicates: list[exp.Expression] = field(default_factory=list)   # columns unqualified


@dataclass(frozen=True)
class Edge:
    left: tuple[Origin, ...]
    right: tuple[Origin, ...]
    kind: str

    def sends(self) -> list[tuple[tuple[Origin, ...], tuple[Origin, ...], str]]:
        """(from, to, kind) of each direction the join type lets a diP travel; never into a
        null-supplying side across an anti join (pruning it would turn matches into nulls),
        nor across NOT IN from a null-supplying side (an outer join's null key is NULL NOT IN
        a non-empty set, but true against the set a diP emptied)."""
        forward, backward = DIRECTIONS[self.kind]
        out = []
        if forward and not (self.kind in (ANTI, NOT_IN) and any(o.nullable for o in self.right)
                            or self.kind == NOT_IN and any(o.nullable for o in self.left)):
            out.append((self.left, self.right, self.kind))
        if backward:
            out.append((self.right, self.left, self.kind))
        return out


@dataclass
class JoinGraph:
    scans: list[Scan]
    edges: list[Edge]
    tree: exp.Expression           # the parsed query; each scan's table node has meta["scan"]

    def is_tree(self) -> bool:
        """Every endpoint one column and the scans linked without a cycle (a forest)."""
        links = set()
        for e in self.edges:
            if len(e.left) != 1 or len(e.right) != 1:
                return False
            links.add(frozenset((e.left[0].scan, e.right[0].scan)))
        parent = list(range(len(self.scans)))

        def root(a: int) -> int:
            while parent[a] != a:
                a = parent[a]
            return a
        for link in links:
            if len(link) == 1:           # a self-join's edge within one scan
                return False
            a, b = map(root, link)
            if a == b:
                return False
            parent[a] = b
        return True
