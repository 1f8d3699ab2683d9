"""The pure decision core: ``decide(snapshot, policy, now) -> Decision``.

Nothing in this package may import Kubernetes, git, the clock or the filesystem (a test
enforces it). The simulator and the reconciler are shells around it.

Its modules but ``types``, ``projection`` and ``lazymaps`` can be compiled by mypyc
(``allot build-core``, :mod:`engine.accel`), which ``tests/core/test_core_compiled.py`` does
and compares with the interpreted core. So code here keeps its annotations true at run time (a
``float`` variable never holds an int; an attribute's type is declared where mypy cannot infer
it), makes no instance with ``object.__new__`` of a class of its own when compiled
(:meth:`~engine.core.victim.Victim.costing`), and keeps subclasses of ``collections.abc``
classes and of ``dict`` in the modules left interpreted.

Quick paths keep the common case cheap (none changes a result): no free GPU and nothing
preemptible skips all searches; a workload alike an earlier one (leaf, debug, shape, cluster,
min runtime, resumable) with nothing admitted or reserved since gets that one's outcome, and
so does one alike but for its min runtime, when that one was kept off reservations before any
search and as many timed reservations start before its protection ends
(:mod:`engine.core.walk_memo`; without loans, whatever its resumable flag); a placement skips a
cluster with no node that has a pod's GPUs free and finds its best-fit node from the nodes the
pool keeps listed by free GPUs (:meth:`~engine.core.placement.Pool.best_node`); failed
placements and searches are remembered until a preemption (the same module), and
a search is skipped when free GPUs plus every victim ranked below could not make room
(:mod:`engine.core.ranksums`) or one that covers it failed; the anti-ping-pong rule is asked
only about leaves with victims, not at all when none ranks below, nor, for work kept off by
reservations once no more can be made, when no node or node group could make room with every
victim ranked below (:meth:`~engine.core.decide._Pass.fails_for_all_below`, with each node
group's pods with every victim taken remembered while nothing changes); the victim search
visits nodes cheapest bound first (:mod:`engine.core.victim_index`); statuses are built lazily,
from numbers recorded in the pass. Caches of pure functions of immutable inputs live across
decisions: "can never fit" per node layout and shape
(:class:`~engine.core.verdicts.ShapeVerdicts`), the static node layout
(:class:`~engine.core.placement.Layouts`), tree walks and shares (on the frozen
:class:`~engine.model.BudgetTree`), each pending workload's queue entry while its leaf's rank
number stays (:class:`~engine.core.queue.KnownEntries`) and the previous queue, updated when few
workloads came or went (:func:`~engine.core.queue.build_queue`; which ones, found by aligning the
two presentations of the queue by identity) with its entries counted per
shape (:func:`~engine.core.queue.queue_shapes`: "can never fit" is asked per shape, no entry
walked), what each running workload alone gives (GPUs, charged leaf, charge rate, release:
:mod:`engine.core.running_facts`), each running workload's victim record while its leaf, rank
and cost stay the same (:mod:`engine.core.victim_cache`) and each node's victim cost sums while
its victims do (:class:`~engine.core.victim_index.KeptSums`). Within a pass, victims are built
and indexed on the first victim search, running work is sorted as releases once, on the first
reservation (:mod:`engine.core.releases`), and which reservations keep a workload off, and why,
once per leaf, timed reservations starting before its protection ends, reservations so far and
projection (:class:`~engine.core.holds.Holds`). A timed reservation's search stops at
the first time a group has the gang's slots, and a drain hold's at the first group whose lower
bound of GPUs short exceeds the best (:mod:`engine.core.reservation`).
"""
