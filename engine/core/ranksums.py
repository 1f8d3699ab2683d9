"""Victim GPUs per leaf rank, for "could every victim ranked below this one make room?".

A decision keeps, per leaf rank 1..n (n + 1: unallocated work), the GPUs of running work
past its min runtime, and asks for the sum over ranks strictly below a given one (rank 0: all
of it) before a victim search (:mod:`engine.core.decide`) and for the words of a status
(:mod:`engine.core.statuses`); victims leave as the decision preempts them. A Fenwick tree
answers both in O(log n). Empty ranks hold 0; ``above`` is asked only for ranks 0..n + 1.
"""

from __future__ import annotations

from typing import Mapping


class RankSums:
    """Fenwick tree over leaf ranks 1..n: GPUs of victims ranked strictly below a rank."""

    def __init__(self, n: int, at: Mapping[int, int] | None = None):
        """Ranks 1..``n``, holding ``at`` (GPUs per rank) to begin with: built in one linear
        pass (each cell passes its sum on to its parent) rather than one :meth:`add` each."""
        self.n, self.tree, self.total = n, [0] * (n + 1), 0
        if at:
            tree = self.tree
            for rank, gpus in at.items():
                tree[rank] += gpus
                self.total += gpus
            for i in range(1, n + 1):
                j = i + (i & -i)
                if j <= n:
                    tree[j] += tree[i]

    def add(self, rank: int, gpus: int) -> None:
        self.total += gpus
        while rank <= self.n:
            self.tree[rank] += gpus
            rank += rank & -rank

    def above(self, rank: int) -> int:
        """Sum over ranks > ``rank``."""
        upto, i = 0, rank
        while i > 0:
            upto += self.tree[i]
            i -= i & -i
        return self.total - upto
