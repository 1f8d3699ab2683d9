"""Fixtures for the view tests: one small simulation of the repository's own budgets, its
state at the end, and that state saved as JSON (what ``/api/state`` serves)."""

from __future__ import annotations

import json

import pytest

from engine.views.derived import document
from engine.views.simstate import default_simulation, state_from_sim


@pytest.fixture(scope="session")
def sim_result():
    return default_simulation(days=0.5, tasks=600, seed=3)


@pytest.fixture(scope="session")
def sim_state(sim_result):
    return state_from_sim(sim_result)


@pytest.fixture(scope="session")
def state_file(sim_state, tmp_path_factory):
    path = tmp_path_factory.mktemp("state") / "state.json"
    path.write_text(json.dumps(document(sim_state), allow_nan=False))
    return path


# the Kubernetes API emulator, for the live (reconciler) view tests
from tests.k8s.emulator.fixtures import kube_client, kube_emulator, kube_kubeconfig  # noqa: E402,F401
