"""The projection of the anti-ping-pong rule: charge rates of running allocated work per
tree node, and the certain charge of protected runs, as one decision admits and preempts.

:mod:`engine.core.preemption` states the rule. For a preemptor whose min runtime is ``m``,
:meth:`Projection.ahead` is the worst-case charge of each subtree over the next ``m``
seconds (every allocated workload running there keeps running), and
:meth:`Projection.behind` the certain one (each protected run until ``min(its protection
left, m)``: work past its min runtime may be preempted any time). A decision loads its
running work once (:meth:`Projection.add_all`), then :meth:`~Projection.add` each admission
and :meth:`~Projection.remove` each victim; ``version`` changes on every update, so caches
of the rule's answers (:mod:`engine.core.pingpong`, :mod:`engine.core.eligibility`) key on it.

Edge cases: a node under which no allocated work runs has no rate when a decision starts
(``rate.get`` gives None) and ``behind(m).get`` gives 0.0 for it; a run with no protection
left adds to the rates only; the certain charges are summed in the order the runs were added,
so they are the same floats however many nodes were summed before a later addition.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from engine.model import BudgetTree


class _Scaled(Mapping[str, float]):
    """``rate x seconds`` per node, computed on lookup (a read-only view)."""

    def __init__(self, rate: Mapping[str, float], seconds: float):
        self.rate, self.seconds = rate, seconds

    def __getitem__(self, key: str) -> float:
        return self.rate[key] * self.seconds

    def get(self, key, default=0.0):  # type: ignore[override]
        r = self.rate.get(key)
        return default if r is None else r * self.seconds

    def __iter__(self):
        return iter(self.rate)

    def __len__(self) -> int:
        return len(self.rate)


class Projection:
    """Charge rates of running allocated work per tree node (rolled up), for the
    anti-ping-pong rule: :meth:`ahead` is the worst-case charge of a subtree over ``m``
    seconds, :meth:`behind` the certain one (protected runs only). Updated as a decision
    admits and preempts; ``version`` changes on every update (callers key caches on it).

    The protected runs are kept in the order they were added, with their indices per
    charged leaf; a node gathers the runs under it (merging its leaves' indices back into
    that order) when :meth:`behind` first asks for it, and :meth:`add` appends to the
    nodes gathered so far. (A busy decision asks for a few nodes of the tree, so gathering
    every run under every node of its path up front cost more.)"""

    def __init__(self, tree: BudgetTree):
        self.tree = tree
        self.paths: dict[str, tuple[str, ...]] = {}
        self.rate: dict[str, float] = {}
        self.protected: list[tuple[tuple[str, ...], float, float]] = []  # (path, rate, seconds)
        self._certain: dict[float, _Certain] = {}
        self._runs = _Runs(tree.leaves_under())  # the protected runs, gathered per node on request
        self.version = 0

    def _path(self, leaf: str) -> tuple[str, ...]:
        path = self.paths.get(leaf)
        if path is None:
            path = self.paths[leaf] = self.tree.path(leaf)
        return path

    def add(self, leaf: str, rate: float, protected_s: float) -> None:
        """``leaf`` runs ``rate`` more (GPU-seconds per second), protected ``protected_s`` more seconds."""
        path = self._path(leaf)
        for n in path:
            self.rate[n] = self.rate.get(n, 0.0) + rate
        if protected_s > 0:
            runs = self._runs
            runs.by_leaf.setdefault(leaf, []).append(len(self.protected))
            self.protected.append((path, rate, protected_s))
            run = (rate, protected_s)
            runs.spans.append(run)
            for n in path:
                gathered = runs.under.get(n)
                if gathered is not None:  # gathered nodes only; the others gather on request
                    gathered.append(run)
            for m, certain in self._certain.items():
                for n in path:
                    if n in certain:  # computed nodes only; the others sum on lookup
                        certain[n] = certain[n] + rate * min(protected_s, m)
        self.version += 1

    def add_all(self, charges: Iterable[tuple[str, float, float]], whole: bool = False) -> None:
        """:meth:`add` for each ``(leaf, rate, protected_s)`` in order (same sums, one version
        bump): how a decision loads its running work. ``whole``: every rate is a whole number
        >= 0 and all of them sum to less than 2**53 (GPUs times whole billing weights), so
        every sum of them is exact, whatever the order: the rates are then summed per leaf
        first and rolled up once per leaf (the same floats, fewer additions)."""
        if self._certain or self._runs.under:  # nodes already summed must be kept up to date
            for leaf, rate, seconds in charges:
                self.add(leaf, rate, seconds)
            return
        rates, paths, protected, tree = self.rate, self.paths, self.protected, self.tree
        runs, spans = self._runs.by_leaf, self._runs.spans
        exact = whole and not rates  # (rates already there may not be whole)
        per_leaf: dict[str, float] = {}
        for leaf, rate, seconds in charges:
            path = paths.get(leaf)
            if path is None:
                path = paths[leaf] = tree.path(leaf)
            if exact:
                per_leaf[leaf] = per_leaf.get(leaf, 0.0) + rate
            else:
                for n in path:
                    rates[n] = rates.get(n, 0.0) + rate
            if seconds > 0:
                mine = runs.get(leaf)
                if mine is None:
                    runs[leaf] = [len(protected)]
                else:
                    mine.append(len(protected))
                protected.append((path, rate, seconds))
                spans.append((rate, seconds))
        for leaf, rate in per_leaf.items():
            for n in paths[leaf]:
                rates[n] = rates.get(n, 0.0) + rate
        self.version += 1

    def remove(self, leaf: str, rate: float) -> None:
        """``leaf`` stops running ``rate`` of unprotected work (a victim)."""
        for n in self._path(leaf):
            self.rate[n] -= rate
        self.version += 1

    def ahead(self, m: float) -> Mapping[str, float]:
        return _Scaled(self.rate, m)

    def behind(self, m: float) -> Mapping[str, float]:
        certain = self._certain.get(m)
        if certain is None:
            certain = self._certain[m] = _Certain(self._runs, self.rate, m)
        return certain

    def protected_under(self, node: str) -> list[tuple[float, float]]:
        """(rate, seconds) of the protected runs under ``node``, in the order they were added."""
        return self._runs.under_node(node)


class _Runs:
    """A projection's protected runs, gathered per tree node on request. The projection and
    its certain-charge sums both read them; it holds no reference to either. Nothing a
    decision builds refers back to its projection, so the projection is freed by reference
    counting when the decision ends; a cycle would leave it, and every ``m``'s sums, to the
    cycle collector, which then ran several times a pass."""

    __slots__ = ("leaves_under", "by_leaf", "spans", "under")

    def __init__(self, leaves_under: Mapping[str, tuple[str, ...]]):
        self.leaves_under = leaves_under  # the tree's node -> its leaves
        self.by_leaf: dict[str, list[int]] = {}  # charged leaf -> its indices in ``protected``
        self.spans: list[tuple[float, float]] = []  # (rate, seconds) of each protected run
        self.under: dict[str, list[tuple[float, float]]] = {}  # node -> its gathered runs

    def under_node(self, node: str) -> list[tuple[float, float]]:
        found = self.under.get(node)
        if found is None:
            by_leaf = self.by_leaf
            lists = [by_leaf[leaf] for leaf in self.leaves_under.get(node, ()) if leaf in by_leaf]
            if len(lists) == 1:
                order = lists[0]
            else:  # merged back into the order of addition
                order = sorted(i for runs in lists for i in runs)
            found = self.under[node] = list(map(self.spans.__getitem__, order))
        return found


class _Certain(dict):
    """:meth:`Projection.behind` for one ``m``: each node's certain charge, summed on first
    lookup over the protected runs under it (in the order they were added, so the sums are
    the same floats as summing every node at once), kept up to date by :meth:`Projection.add`.
    ``rate``: the projection's rates (a node without one has no certain charge either)."""

    def __init__(self, runs: _Runs, rate: Mapping[str, float], m: float):
        super().__init__()
        self.runs, self.rate, self.m = runs, rate, m

    def __missing__(self, node: str) -> float:
        total, m = 0.0, self.m
        for rate, seconds in self.runs.under_node(node):
            total = total + rate * min(seconds, m)
        self[node] = total
        return total

    def get(self, node, default=0.0):  # type: ignore[override]
        return self[node] if node in self.rate else default

    def __bool__(self) -> bool:  # a projection, even before any node is summed
        return True
