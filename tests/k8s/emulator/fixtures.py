"""Pytest fixtures for tests that need a Kubernetes API: the emulator, a client, a kubeconfig.

``tests/k8s/conftest.py`` imports them, so every test under ``tests/k8s`` can ask for:

- ``kube_emulator``: a fresh :class:`KubeEmulator` serving on 127.0.0.1 for the test; the test
  fails at teardown if the emulator hit an internal error (so an emulator bug is never mistaken
  for an injected fault).
- ``kube_client``: a ``kubernetes.client.ApiClient`` configured for it (plain HTTP).
- ``kube_kubeconfig``: the path of a kubeconfig file for it (``load_kube_config(path)``,
  ``allot reconcile --kubeconfig PATH``).
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from .runner import run_emulator
from .server import KubeEmulator


@pytest.fixture
def kube_emulator() -> Iterator[KubeEmulator]:
    with run_emulator() as emu:
        yield emu
        errors = list(emu.internal_errors)
    if errors:
        pytest.fail("the Kubernetes emulator failed internally:\n" + "\n".join(errors))


@pytest.fixture
def kube_client(kube_emulator: KubeEmulator) -> Iterator[kubernetes.client.ApiClient]:
    configuration = kubernetes.client.Configuration()
    configuration.host = kube_emulator.url
    configuration.api_key = {"authorization": "Bearer emulator-token"}
    client = kubernetes.client.ApiClient(configuration)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def kube_kubeconfig(kube_emulator: KubeEmulator) -> Path:
    return Path(kube_emulator.kubeconfig)
