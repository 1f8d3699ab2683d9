"""The reconciler: the in-cluster shell around the pure decision core.

It follows the policy repository, observes Jobs, Pods and Nodes, asks
:func:`engine.core.decide.decide` what to do, and applies the answer to the cluster. It never
decides anything itself. Layers, from the bottom (kopf-style: only the lowest one talks to
Kubernetes):

- :mod:`engine.k8s.client`   the ONE module that calls the Kubernetes API (official client):
  list/watch with resourceVersion and resume on 410, patches with optimistic concurrency and
  retries on 409/5xx, events, leases, configmaps. Everything above works on plain dicts.
- :mod:`engine.k8s.marks`    the annotations the reconciler writes on Jobs (its durable state:
  a restarted or new leader recovers every running Job's start, protection and placement).
- :mod:`engine.k8s.jobs`     pure: what Allot reads of one Job (managed?, its workload, when it
  finished) and GPU quantities as Kubernetes reads them.
- :mod:`engine.k8s.observe`  pure: cluster objects -> :class:`~engine.core.types.Snapshot`.
- :mod:`engine.k8s.apply`    a Decision's actions -> patches and Events.
- :mod:`engine.k8s.ledger_store` the usage ledger in a ConfigMap, charged once per loop.
- :mod:`engine.k8s.leader`   Lease-based leader election.
- :mod:`engine.k8s.policy_source` the policy git repository followed with pygit2.
- :mod:`engine.k8s.metrics`  Prometheus text exposition, ``/healthz``, ``/readyz``.
- :mod:`engine.k8s.export`   recent submissions as a trace in the simulator's format.
- :mod:`engine.k8s.loop`     the watch-driven loop with periodic resync.
- :mod:`engine.k8s.watches`  the watches on Jobs and Nodes that say when the loop should run.

The command is ``allot reconcile`` (:mod:`engine.commands.reconcile`).
"""
