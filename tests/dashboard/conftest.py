"""Fixtures for the dashboard tests: a small simulation's state served on a free port, and a
headless Chromium driven by Playwright (Debian's /usr/bin/chromium; never a downloaded browser)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.dashboard.app import serve
from engine.views.simstate import default_simulation, state_from_sim

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def sim_state():
    return state_from_sim(default_simulation(days=0.5, tasks=600, seed=3))


@pytest.fixture(scope="session")
def base_url(sim_state):
    server = serve(lambda: sim_state, 0)
    host, port = server.server_address[:2]
    yield f"http://{host}:{port}"
    server.shutdown()


@pytest.fixture(scope="session")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is absent (install Debian's chromium: apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="Python Playwright is not installed")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture()
def page(browser, base_url):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    external: list[str] = []
    pg.on("request", lambda req: external.append(req.url) if not req.url.startswith(base_url) else None)
    pg.errors, pg.external = errors, external  # type: ignore[attr-defined]
    yield pg
    context.close()
