"""Fixtures for the simulator tests: a tiny hand-computable configuration."""

from __future__ import annotations

import pytest

from engine.model import BudgetNode, BudgetTree, Cluster, Config, Policy


def tiny_config(nodes: int = 1, gpus_per_node: int = 4, shares=(50.0, 50.0)) -> Config:
    tree = BudgetTree.build([BudgetNode("root", None, 100.0),
                             BudgetNode("a", "root", shares[0]),
                             BudgetNode("b", "root", shares[1])])
    policy = Policy(clusters=(Cluster("c", "h100", nodes, gpus_per_node, nodes),))
    return Config(tree=tree, policy=policy, origin="tiny")


@pytest.fixture
def tiny() -> Config:
    return tiny_config()
