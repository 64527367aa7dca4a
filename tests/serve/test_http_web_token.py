"""The web page's token from the address's #fragment, in a real headless Chromium against a real
tarsd: any site can open http://127.0.0.1:8277/#token=JUNK, so the page takes a token from the
address only when it keeps none that works, and only once tarsd has accepted it."""

from __future__ import annotations

import pytest

pytest.importorskip("playwright", reason="the playwright package is missing: bash scripts/test.sh installs the test extras")
from playwright.sync_api import expect  # noqa: E402

JUNK = "junk-from-another-site-" + "x" * 30


def opened(browser, url: str):  # noqa: F811
    """A new tab on ``url``, as a link or window.open from another site makes one."""
    page = browser.new_page()
    page.goto(url)
    return page


def kept(page) -> str | None:
    return page.evaluate("localStorage.getItem('tars.token')")


def test_a_token_in_the_address_never_replaces_a_working_one(http_daemon, browser):  # noqa: F811
    web = http_daemon()
    first = opened(browser, f"{web.url}#token={web.token}")  # first setup: `tarsctl http url`
    first.wait_for_selector("#app:not([hidden])")
    assert kept(first) == web.token and "token" not in first.url

    junk = opened(browser, f"{web.url}#token={JUNK}")
    junk.wait_for_selector("#app:not([hidden])")  # the kept token still opens the page
    assert kept(junk) == web.token and "token" not in junk.url
    with web.client() as client:
        assert client.get("/status").json()["http"]["auth_failures"] == 0  # the junk was not even tried

    # After a rotation the kept token fails: a new one from the address is taken once tarsd accepts it.
    new = web.daemon.tarsctl("http", "token", "--rotate").stdout.strip()
    refused = opened(browser, f"{web.url}#token={JUNK}")
    expect(refused.locator("#login-error")).to_contain_text("refused")
    assert kept(refused) is None
    rotated = opened(browser, f"{web.url}#token={new}")
    rotated.wait_for_selector("#app:not([hidden])")
    assert kept(rotated) == new


def test_a_refused_token_in_the_address_is_not_kept(http_daemon, browser):  # noqa: F811
    web = http_daemon()
    page = opened(browser, f"{web.url}#token={JUNK}")
    expect(page.locator("#login-error")).to_contain_text("tarsd refused the token in the address")
    assert kept(page) is None and "token" not in page.url
