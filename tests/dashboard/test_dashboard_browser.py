"""The dashboard in headless Chromium, on a simulation's state: the page loads without script
errors or external requests, and the tree, the per-team charts, the queue and the per-GPU
timeline are drawn with the simulation's data; searching a job shows its explanation."""

from __future__ import annotations

import json

from engine.dashboard.app import handle
from tests.dashboard.conftest import ARTIFACTS


def _load(page, base_url):
    page.goto(base_url + "/")
    page.wait_for_selector("body[data-ready='1']", timeout=30000)


def test_page_renders_tree_charts_queue_and_timeline(page, base_url, sim_state):
    _load(page, base_url)
    tree = page.locator("#tree tr.tree-row")
    assert tree.count() == len(sim_state.config.tree.nodes)
    first_leaf = sim_state.config.tree.leaves()[0]
    row = page.locator(f"#tree tr[data-node='{first_leaf}']").inner_text()
    rank = sim_state.decision.ranks[first_leaf].rank
    assert first_leaf in row and str(rank) in row.split()

    charts = page.locator("#series svg.series-chart")
    assert charts.count() == len(sim_state.config.tree.leaves())
    assert page.locator("#series path.delivered").first.get_attribute("d").count("L") > 4

    queue = page.locator("#queue tr.queue-row")
    waiting = [w for w in sim_state.snapshot.pending]
    assert waiting, "the test simulation should leave work waiting"
    assert queue.count() == min(300, len(waiting))
    first = min(waiting, key=lambda w: sim_state.decision.statuses[w.id].queue_position or 10**9)
    assert queue.first.get_attribute("data-job") == first.id
    # the state column names why it waits, in one word (Decision.waiting), as allot queue's WHY
    st, cause = sim_state.decision.statuses[first.id].state, sim_state.decision.waiting.get(first.id)
    assert queue.first.locator("td").last.inner_text() == (f"{st} ({cause})" if cause else st)
    assert any("(" in queue.nth(i).locator("td").last.inner_text() for i in range(queue.count()))

    canvas = page.locator("#timeline")
    assert int(canvas.get_attribute("data-rows")) == sum(n.gpus for n in sim_state.snapshot.nodes)
    assert int(canvas.get_attribute("data-bars")) > 100
    # pixels were drawn: the canvas is not blank
    coloured = page.evaluate("""() => { const c = document.querySelector('#timeline');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height - 20).data;
        let n = 0; for (let i = 0; i < d.length; i += 4) if (d[i] !== 255 || d[i+1] !== 255 || d[i+2] !== 255) n++;
        return n; }""")
    assert coloured > 10000
    assert page.errors == []
    assert page.external == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)


def test_job_search_shows_the_explanation(page, base_url, sim_state):
    _load(page, base_url)
    wid = sim_state.snapshot.pending[0].id
    page.fill("#job", wid)
    page.click("#search button[type=submit]")
    page.wait_for_selector("#explain-output li.topic-rank", timeout=20000)
    text = page.locator("#explain-output").inner_text()
    status = sim_state.decision.statuses[wid]
    assert f"ranks {status.rank} of {len(sim_state.decision.ranks)}" in text
    assert "Level 1:" in text
    assert page.locator("#explain-title").inner_text().startswith(wid)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard-explain.png"))


def test_clicking_a_queue_row_explains_it_and_unknown_jobs_say_so(page, base_url):
    _load(page, base_url)
    row = page.locator("#queue tr.queue-row").nth(1)
    wid = row.get_attribute("data-job")
    row.click()
    page.wait_for_selector("#explain-output li.statement", timeout=20000)
    assert page.locator("#explain-title").inner_text().startswith(wid)
    page.fill("#job", "no-such-job-xyz")
    page.click("#search button[type=submit]")
    page.wait_for_selector("#explain-output li.error", timeout=20000)
    assert "no workload" in page.locator("#explain-output").inner_text()


def test_endpoints_without_a_state_answer_503_and_unknown_paths_404():
    status, _, body = handle("GET", "/api/state", "", lambda: None)
    assert status == 503 and b"no state yet" in body
    assert handle("GET", "/nope", "", lambda: None)[0] == 404
    assert handle("POST", "/api/state", "", lambda: None)[0] == 405
    assert handle("GET", "/static/../app.py", "", lambda: None)[0] == 404
    status, headers, body = handle("GET", "/", "", lambda: None)
    assert status == 200 and headers["Content-Type"].startswith("text/html") and b"app.js" in body


def test_bad_api_requests_say_what_to_send(sim_state):
    """A missing ?job= is a 400 that says so (it matched every workload: a 404 listing them),
    and a view's problem names the query parameter, not the command-line flag."""
    for path in ("/api/explain", "/api/eta"):
        status, _, body = handle("GET", path, "", lambda: sim_state)
        assert status == 400 and json.loads(body)["error"].startswith(f"{path} needs the workload: ?job=ID")
    status, _, body = handle("GET", "/api/usage", "subtree=nope", lambda: sim_state)
    assert status == 400 and json.loads(body)["error"].startswith("subtree: no budget node 'nope'")


def test_team_totals_are_allot_usage_s(page, base_url, sim_state):
    """Each chart's 'delivered X / entitled Y GPU-h' is what allot usage says for the team (it
    summed the series' bins, whose water-filling gave other entitled GPU-hours)."""
    from engine.views.usage import usage_report

    _load(page, base_url)
    rows = {r["node"]: r for r in usage_report(sim_state)["rows"]}
    checked = 0
    for leaf in sim_state.config.tree.leaves():
        sub = page.locator(f"#series .chart[data-leaf='{leaf}'] .sub").inner_text()
        want = f"delivered {rows[leaf]['delivered_gpu_h']:.0f} / entitled {rows[leaf]['entitled_gpu_h']:.0f} GPU-h"
        assert sub.startswith(want), (leaf, sub, want)
        checked += rows[leaf]["entitled_gpu_h"] > 0
    assert checked > 3


def test_a_refused_contract_shows_no_terms_in_the_queue(browser, sim_state):
    """A Job whose contract was refused (a label that does not parse) has none in force: its
    queue row reads (refused) and '-' for priority, GPUs and min runtime, not the placeholder's
    0, 1 and 0s (nor the rows' null)."""
    from dataclasses import replace

    from engine.core.types import Contract
    from engine.dashboard.app import serve

    pending = sim_state.snapshot.pending[:4]
    # (queued with a placeholder contract, as engine.k8s.jobs.parse_job gives a refused one)
    bad = replace(pending[0], id="team-x/banana", contract=Contract(
        budget=None, min_runtime_s=0.0, gpus_per_pod=1, pods=1),
        invalid="allot.dev/min-runtime: cannot read duration 'banana'")
    state = replace(sim_state, snapshot=replace(sim_state.snapshot, pending=(*pending, bad)))
    assert state.decision.statuses[bad.id].state == "rejected"
    server = serve(lambda: state, 0)
    host, port = server.server_address[:2]
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        _load(page, f"http://{host}:{port}")
        cells = page.locator(f"#queue tr[data-job='{bad.id}'] td").all_inner_texts()
        # POS, WORKLOAD, BUDGET, RANK, METRIC, PRIO, GPUS, MIN-RT, WAITED, STATE
        assert cells[2].strip() == "(refused)" and cells[9] == "rejected"
        assert cells[5:8] == ["-", "-", "-"], cells
        assert errors == []
    finally:
        context.close()
        server.shutdown()
