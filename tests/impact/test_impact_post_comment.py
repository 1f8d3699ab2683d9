"""``ci/post_comment.py`` end to end against a local server speaking GitHub's REST API:
one sticky comment per pull request, found by its hidden marker, created once and then
updated; clear failures for 401, rate limits and persistent 5xx; the token never shown."""

from __future__ import annotations

import json
import time

from tests.impact.conftest import TOKEN

MARKER = "<!-- allot-impact -->"


def assert_token_hidden(run) -> None:
    assert TOKEN not in run.out and TOKEN not in run.err


def test_creates_the_sticky_comment_with_the_marker_first(github, post):
    run = post("## Impact\nteam-a gains 10 GPU-hours")
    assert run.code == 0, run.err
    assert "created" in run.out
    [comment] = github.comments[7]
    assert comment["body"].splitlines()[0] == MARKER
    assert "team-a gains 10 GPU-hours" in comment["body"]
    [call] = github.calls("POST")
    assert call.path == "/repos/acme/budgets/issues/7/comments"
    assert call.headers["authorization"] == f"Bearer {TOKEN}"
    assert call.headers["accept"] == "application/vnd.github+json"
    assert_token_hidden(run)


def test_second_run_updates_the_same_comment_found_on_a_later_page(github, post):
    github.page_cap = 2
    for i in range(3):
        github.add_comment(7, f"human comment {i}")
    assert post("first report").code == 0
    for i in range(2):
        github.add_comment(7, f"later human comment {i}")
    run = post("second report")
    assert run.code == 0, run.err
    assert "updated" in run.out
    bots = [c for c in github.comments[7] if MARKER in c["body"]]
    assert len(bots) == 1 and bots[0]["body"].endswith("second report")
    assert len(github.comments[7]) == 6  # 5 human comments + 1 sticky
    # GitHub served 2 comments a page; the sticky one was on page 2 of 3 in the second run,
    # reached by following the Link header
    pages = [c.query.get("page", ["1"])[0] for c in github.calls("GET")]
    assert pages == ["1", "2", "1", "2", "3"]
    assert len(github.calls("POST")) == 1 and len(github.calls("PATCH")) == 1


def test_identical_body_is_not_rewritten(github, post):
    assert post("same").code == 0
    run = post("same")
    assert run.code == 0 and "unchanged" in run.out
    assert not github.calls("PATCH")


def test_other_markers_do_not_collide(github, post):
    github.add_comment(7, "<!-- another-bot -->\nhello")
    assert post("mine").code == 0
    assert len(github.comments[7]) == 2
    run = post("mine again", "--marker", "<!-- another-bot -->")
    assert run.code == 0 and "updated" in run.out
    assert github.comments[7][0]["body"].endswith("mine again")


def test_401_fails_at_once_without_retry_and_hides_the_token(github, post):
    run = post("x", token="ghp_wrongTOKEN_abcdef123456")
    assert run.code == 1
    assert "HTTP 401" in run.err and "Bad credentials" in run.err and "GITHUB_TOKEN" in run.err
    assert len(github.log) == 1
    assert "ghp_wrongTOKEN_abcdef123456" not in run.out + run.err


def test_403_rate_limit_waits_for_retry_after_then_succeeds(github, post):
    github.fail_next(403, {"Retry-After": "1"}, "You have exceeded a secondary rate limit")
    run = post("after the limit")
    assert run.code == 0, run.err
    assert "rate limited" in run.err and "waiting 1 s" in run.err
    assert run.seconds >= 1.0
    assert github.comments[7][0]["body"].endswith("after the limit")


def test_403_rate_limit_reset_beyond_the_bound_fails_clearly_without_waiting(github, post):
    reset = str(int(time.time()) + 3600)
    github.fail_next(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset},
                     "API rate limit exceeded")
    run = post("x")
    assert run.code == 1
    assert "rate limited" in run.err and "more than the 5 s this script waits" in run.err
    assert run.seconds < 5
    assert len(github.log) == 1
    assert_token_hidden(run)


def test_403_rate_limit_that_persists_after_the_wait_fails(github, post):
    github.fail_next(429, {"Retry-After": "1"}, "slow down", times=2)
    run = post("x")
    assert run.code == 1
    assert "still rate limited" in run.err
    assert len(github.log) == 2


def test_403_without_rate_limit_is_a_permission_error(github, post):
    github.fail_next(403, {}, "Resource not accessible by integration")
    run = post("x")
    assert run.code == 1
    assert "Resource not accessible by integration" in run.err
    assert "pull-requests: write" in run.err
    assert len(github.log) == 1


def test_5xx_is_retried_with_backoff_then_succeeds(github, post):
    github.fail_next(502, {}, "Bad Gateway", times=2)
    run = post("eventually")
    assert run.code == 0, run.err
    assert "retry 1/3 in 0.05 s" in run.err and "retry 2/3 in 0.1 s" in run.err
    assert github.comments[7][0]["body"].endswith("eventually")


def test_5xx_that_persists_fails_clearly_after_all_retries(github, post):
    github.fail_next(503, {}, "Service Unavailable", times=10)
    run = post("x", ALLOT_POST_RETRIES="2")
    assert run.code == 1
    assert "failed after 3 attempts" in run.err and "HTTP 503" in run.err
    assert len(github.log) == 3
    assert not github.comments
    assert_token_hidden(run)


def test_text_echoed_by_the_server_is_scrubbed_of_the_token(github, post):
    github.fail_next(422, {}, f"Validation Failed: body contains {TOKEN}")
    run = post("x")
    assert run.code == 1
    assert "Validation Failed: body contains ***" in run.err
    assert_token_hidden(run)


def test_unreachable_api_is_retried_then_fails(post):
    run = post("x", GITHUB_API_URL="http://127.0.0.1:9", ALLOT_POST_RETRIES="1")
    assert run.code == 1
    assert "network" in run.err and "failed after 2 attempts" in run.err


def test_usage_errors_exit_2(github, post, tmp_path):
    assert post("x", token="").code == 2
    assert "GITHUB_TOKEN is not set" in post("x", token="").err
    run = post("x", PR_NUMBER="", GITHUB_EVENT_PATH="")
    assert run.code == 2 and "no pull request number" in run.err
    assert post("x", GITHUB_REPOSITORY="not-a-repo").code == 2
    assert not github.log


def test_pull_request_number_is_read_from_the_actions_event_file(github, post, tmp_path):
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 42}}))
    run = post("from event", PR_NUMBER="", GITHUB_EVENT_PATH=str(event))
    assert run.code == 0, run.err
    assert github.comments[42][0]["body"].endswith("from event")


def test_an_oversized_report_is_truncated_to_githubs_limit(github, post):
    run = post("x" * 70000)
    assert run.code == 0, run.err
    body = github.comments[7][0]["body"]
    assert len(body) <= 65536 and body.startswith(MARKER) and "report truncated" in body


def test_pagination_links_to_another_host_are_not_followed(github, post):
    github.page_cap = 1
    github.add_comment(7, "a")
    github.add_comment(7, "b")
    github.link_host = "evil.example:80"
    run = post("x")
    assert run.code == 1 and "pagination link leaves" in run.err
    assert len(github.log) == 1


def test_a_comment_that_only_mentions_the_marker_is_never_overwritten(github, post):
    """Ours starts with the marker on its first line; someone quoting it is left alone."""
    mention = github.add_comment(7, f"Why does the bot write `{MARKER}` in its comment?", "alice")
    ours = github.add_comment(7, f"{MARKER}\nold report", "bot")
    run = post("new report")
    assert run.code == 0, run.err
    assert mention["body"].startswith("Why does the bot") and ours["body"].endswith("new report")
    assert [c.path for c in github.calls("PATCH")] == [f"/repos/acme/budgets/issues/comments/{ours['id']}"]


def test_a_post_whose_reply_was_lost_is_not_made_twice(github, post):
    """The POST made the comment but its answer was a 502: the script looks again and finds
    it, rather than posting a second one; the next run updates that one."""
    github.lost_replies = 1
    run = post("report v1")
    assert run.code == 0, run.err
    assert "looking for the comment before posting again" in run.err
    assert len(github.comments[7]) == 1 and len(github.calls("POST")) == 1
    assert len(github.calls("GET")) == 2  # (the comments listed once more, not twice)
    assert post("report v2").code == 0
    [comment] = github.comments[7]
    assert comment["body"].endswith("report v2")


def test_a_body_that_is_not_utf8_is_posted_with_replacement_characters(github, post, tmp_path):
    body = tmp_path / "cut.md"
    body.write_bytes("problems: Équipe".encode()[:-5] + b"\xc3")  # (cut inside a character)
    run = post("x", "--body-file", str(body))
    assert run.code == 0, run.err
    assert github.comments[7][0]["body"].endswith("\ufffd")


def test_a_validation_failure_gives_githubs_reasons(github, post):
    github.forced.append((422, {}, {"message": "Validation Failed", "errors": [
        {"resource": "IssueComment", "field": "body",
         "message": "body is too long (maximum is 65536 characters)"}]}))
    run = post("x")
    assert run.code == 1
    assert "HTTP 422: Validation Failed (body is too long (maximum is 65536 characters))" in run.err


def test_settings_no_github_run_would_have_are_usage_errors(github, post, tmp_path):
    """Without a traceback, and before any request (so the token goes nowhere)."""
    event = tmp_path / "event.json"
    event.write_text("[]")
    for env in ({"token": TOKEN + "\nX"}, {"token": "tøken"}, {"GITHUB_API_URL": "api.github.example"},
                {"ALLOT_POST_RETRIES": "inf"}, {"ALLOT_POST_RETRIES": "nan"}, {"PR_NUMBER": "0"},
                {"PR_NUMBER": "", "GITHUB_EVENT_PATH": str(event)}):
        run = post("x", **env)
        assert run.code == 2 and "Traceback" not in run.err, (env, run.err)
        assert TOKEN not in run.err
    assert not github.log


def test_a_truncated_report_closes_its_folds_before_the_note(github, post):
    text = "## title\n\n<details><summary>every team</summary>\n\n```\n" + "| t | 1 |\n" * 20000
    assert post(text).code == 0
    body = github.comments[7][0]["body"]
    assert len(body) <= 65536
    assert body.count("<details") == body.count("</details>") and body.count("```") % 2 == 0
    assert body.rstrip().endswith("see the workflow run for all of it)_")
    assert body.index("</details>") < body.index("report truncated")
