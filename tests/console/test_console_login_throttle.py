"""Login throttle (36.8): per account and per client address, a 429 at once with ``Retry-After``,
no password checked past the limit, counts shared by every web process, and guessing never
slows the API (nothing sleeps on a web thread)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import httpx
import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.console_helpers import PASSWORD, form_csrf, staff
from webhooks.config import Settings
from webhooks.console import auth, login_throttle
from webhooks.console.models import LoginThrottle
from webhooks.storage.timeutil import utcnow


def attempt(client: FlaskClient, email: str, password: str, address: str) -> object:
    """One login from ``address`` (the peer's address, as the WSGI server reports it)."""
    environ = {"REMOTE_ADDR": address}
    token = form_csrf(client.get("/console/login", environ_base=environ).get_data(as_text=True))
    return client.post("/console/login", data={"csrf_token": token, "email": email, "password": password},
                       environ_base=environ)


@pytest.fixture
def hashes_checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every password the login checked (a refused attempt must check none)."""
    checked: list[str] = []
    real = auth.check_password_hash

    def counting(stored: str, password: str) -> bool:
        checked.append(password)
        return real(stored, password)

    monkeypatch.setattr(auth, "check_password_hash", counting)
    return checked


def test_an_account_is_refused_at_once_after_its_limit_whatever_the_address(client: FlaskClient, hashes_checked) -> None:
    user = staff("operator")
    for number in range(login_throttle.ACCOUNT_LIMIT):
        assert attempt(client, user.email, "wrong", f"198.51.100.{number}").status_code == 401
    hashes_checked.clear()

    refused = attempt(client, user.email, PASSWORD, "198.51.100.99")  # the right password, too late

    assert refused.status_code == 429
    assert 0 < int(refused.headers["Retry-After"]) <= login_throttle.WINDOW.total_seconds()
    assert "Too many login attempts for this account" in refused.get_data(as_text=True)
    assert hashes_checked == []  # refused before any password hash is computed
    assert client.get("/console/").status_code == 302


def test_an_address_is_refused_after_its_limit_whatever_the_account(client: FlaskClient, hashes_checked) -> None:
    for number in range(login_throttle.ADDRESS_LIMIT):
        assert attempt(client, f"guess{number}@example.com", "wrong", "203.0.113.7").status_code == 401
    hashes_checked.clear()

    refused = attempt(client, "someone-else@example.com", "wrong", "203.0.113.7")
    elsewhere = attempt(client, "someone-else@example.com", "wrong", "203.0.113.8")

    assert refused.status_code == 429 and "from your network address" in refused.get_data(as_text=True)
    assert int(refused.headers["Retry-After"]) > 0
    assert elsewhere.status_code == 401  # another address is not held up
    assert hashes_checked == ["wrong"]


def test_the_limit_ends_with_its_window(client: FlaskClient) -> None:
    user = staff("viewer")
    for _ in range(login_throttle.ACCOUNT_LIMIT + 1):
        attempt(client, user.email, "wrong", "198.51.100.1")
    assert attempt(client, user.email, PASSWORD, "198.51.100.1").status_code == 429

    LoginThrottle.update(window_started_at=utcnow() - login_throttle.WINDOW).execute()

    assert attempt(client, user.email, PASSWORD, "198.51.100.1").status_code == 303


def test_a_successful_login_clears_the_accounts_count(client: FlaskClient) -> None:
    user = staff("viewer")
    for _ in range(login_throttle.ACCOUNT_LIMIT - 1):
        attempt(client, user.email, "wrong", "198.51.100.1")
    assert attempt(client, user.email, PASSWORD, "198.51.100.1").status_code == 303
    client.delete_cookie("console_session", path="/console")

    answers = [attempt(client, user.email, "wrong", "198.51.100.1").status_code
               for _ in range(login_throttle.ACCOUNT_LIMIT)]

    assert answers == [401] * login_throttle.ACCOUNT_LIMIT


def test_flask_staff_unlock_lets_a_locked_account_log_in_again(app: Flask, client: FlaskClient) -> None:
    user = staff("viewer")
    for _ in range(login_throttle.ACCOUNT_LIMIT + 1):
        attempt(client, user.email, "wrong", f"198.51.100.{_}")

    result = app.test_cli_runner().invoke(args=["staff", "unlock", user.email])

    assert result.exit_code == 0 and "may log in again" in result.output
    assert attempt(client, user.email, PASSWORD, "198.51.100.50").status_code == 303


def test_the_address_is_the_one_a_trusted_proxy_forwarded(client: FlaskClient) -> None:
    """Behind a proxy on the same host every login comes from 127.0.0.1: the throttle must count the
    address the proxy saw, and never one a client wrote into ``X-Forwarded-For`` itself."""
    for number in range(login_throttle.ADDRESS_LIMIT):
        token = form_csrf(client.get("/console/login").get_data(as_text=True))
        client.post("/console/login", data={"csrf_token": token, "email": f"g{number}@example.com", "password": "x"},
                    headers={"X-Forwarded-For": "10.9.9.9, 203.0.113.7"}, environ_base={"REMOTE_ADDR": "127.0.0.1"})

    def from_proxy(forwarded_for: str, peer: str = "127.0.0.1") -> int:
        token = form_csrf(client.get("/console/login").get_data(as_text=True))
        return client.post("/console/login", data={"csrf_token": token, "email": "new@example.com", "password": "x"},
                           headers={"X-Forwarded-For": forwarded_for}, environ_base={"REMOTE_ADDR": peer}).status_code

    assert from_proxy("203.0.113.7") == 429  # the client the proxy saw is held
    assert from_proxy("203.0.113.8") == 401  # another client behind the same proxy is not
    assert from_proxy("203.0.113.8", peer="198.51.100.5") == 401  # an untrusted peer's header is ignored...
    assert from_proxy("203.0.113.7", peer="198.51.100.5") == 401  # ...so it cannot borrow another's count


#: Parallel guessers in the cross-process test and the guesses each makes.
GUESSERS, GUESSES = 48, 6


def test_a_failed_login_never_sleeps_on_a_web_thread(client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """A guess is answered at once: a web thread asleep a second per failed guess (as before) let 48
    guessers hold every thread of the web process, and another tenant's API waited seconds."""
    def no_sleep(seconds: float) -> None:
        raise AssertionError(f"a login slept {seconds} s on a web thread")

    monkeypatch.setattr(time, "sleep", no_sleep)
    user = staff("operator")
    answers = [attempt(client, user.email, "wrong", "198.51.100.1").status_code
               for _ in range(login_throttle.ACCOUNT_LIMIT + 2)]

    assert answers == [401] * login_throttle.ACCOUNT_LIMIT + [429, 429]


def test_the_throttle_holds_across_gunicorn_workers(
    settings: Settings, start_web: Callable[..., str],
) -> None:
    """Two processes, 48 guessers at once: the account still gets exactly its limit of checked guesses.
    (What guessing costs other clients is measured in ``bench/``, not timed here.)"""
    user = staff("operator")
    url = start_web(settings, app="app:create_app()", WEB_CONCURRENCY="2", WEB_THREADS="8")
    browsers = []
    for number in range(GUESSERS):  # each with its login form's cookie and token, and its own address
        browser = httpx.Client(base_url=url, trust_env=False, timeout=60,  # no keep-alive: no race with
                               limits=httpx.Limits(max_keepalive_connections=0),  # gunicorn's 2 s idle close
                               headers={"X-Forwarded-For": f"198.51.100.{number}"})
        browser.token = form_csrf(browser.get("/console/login").text)  # type: ignore[attr-defined]
        browsers.append(browser)
    answers: Counter[int] = Counter()
    retry_after: list[int] = []
    lock = threading.Lock()

    def guess(browser: httpx.Client) -> None:
        for _ in range(GUESSES):
            response = browser.post("/console/login", data={
                "csrf_token": browser.token, "email": user.email, "password": "not it"})  # type: ignore[attr-defined]
            with lock:
                answers[response.status_code] += 1
                if response.status_code == 429:
                    retry_after.append(int(response.headers["Retry-After"]))

    with ThreadPoolExecutor(GUESSERS) as pool:
        try:
            list(pool.map(guess, browsers))
        finally:
            for browser in browsers:
                browser.close()

    assert answers[401] == login_throttle.ACCOUNT_LIMIT
    assert answers[401] + answers[429] == GUESSERS * GUESSES, answers
    assert all(0 < seconds <= login_throttle.WINDOW.total_seconds() for seconds in retry_after)


def test_a_login_beyond_the_processs_concurrent_logins_is_refused_at_once(client: FlaskClient, hashes_checked) -> None:
    user = staff("viewer")
    held = [login_throttle.login_slot() for _ in range(login_throttle.CONCURRENT_LOGINS)]
    assert all(slot.__enter__() for slot in held)  # every slot taken, as by logins being checked
    try:
        refused = attempt(client, user.email, PASSWORD, "198.51.100.1")
    finally:
        for slot in held:
            slot.__exit__(None, None, None)

    assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
    assert "Try again in a second" in refused.get_data(as_text=True)
    assert hashes_checked == [] and LoginThrottle.select().count() == 0  # no password checked, nothing counted
    assert attempt(client, user.email, PASSWORD, "198.51.100.1").status_code == 303
