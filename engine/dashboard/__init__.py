"""The dashboard: one page and JSON endpoints over a view state (see :mod:`engine.dashboard.app`)."""
