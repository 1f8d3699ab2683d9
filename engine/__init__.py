"""Allot: budgets of GPU time, hierarchical fair share and scheduling contracts, as code."""

__version__ = "0.1.0"
