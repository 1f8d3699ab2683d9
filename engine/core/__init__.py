"""The pure decision core: ``decide(snapshot, policy, now) -> Decision``.

Nothing in this package may import Kubernetes, git, the clock or the filesystem (a test
enforces it). The simulator and the reconciler are shells around it.
"""
