"""Fixtures for the Kubernetes tests: the API emulator (see ``tests/k8s/emulator``)."""
from .emulator.fixtures import kube_client, kube_emulator, kube_kubeconfig

__all__ = ["kube_client", "kube_emulator", "kube_kubeconfig"]
