"""The directory sign-in under attack (issue 48): a low-privilege account and a second person's
browser try the login step's redirect, the callback's error parameters, forged ID tokens and
replayed logout tokens. The provider is the httpx mock transport of
:mod:`tests.integration.test_directory_tokens`."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from fastapi.testclient import TestClient
from joserfc import jwt
from joserfc.jwk import OctKey

from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.console.oidc import Directory, RefusedError
from projections.records import access_log, users
from projections.store.store import Store
from tests.integration.test_directory_tokens import (
    AT,
    DUE,
    ISSUER,
    KEY,
    OTHER,
    Provider,
    config,
    logout_token,
    signed_in_through,
    transport,
)

MEG = {"sub": "f00d-meg", "preferred_username": "meg", "groups": ["compliance-managers"], "amr": ["mfa"]}


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "d.duckdb")
    yield s
    s.close()


@pytest.fixture()
def console(store: Store) -> tuple[TestClient, Provider]:
    provider = Provider()
    app = create_app(store, ConsoleConfig(DUE, "t" * 48, directory=config()))
    app.state.console.directory = Directory(config(), provider.transport())
    return TestClient(app), provider


def _continue_target(page: str) -> str:
    return page.split('content="0;url=')[1].split('"', maxsplit=1)[0]


@pytest.mark.parametrize("next_", ["/\t/evil.test/", "/\n/evil.test/", "/\r/evil.test", "/ /evil.test", "//evil.test"])
def test_the_page_after_a_directory_sign_in_never_leads_to_another_site(
    console: tuple[TestClient, Provider], next_: str
) -> None:
    client, provider = console
    r = client.get("/auth/login", params={"next": next_}, follow_redirects=False)
    query = parse_qs(urlparse(r.headers["location"]).query)
    provider.nonce, provider.claims = query["nonce"][0], MEG
    page = client.get("/auth/callback", params={"code": "c", "state": query["state"][0]}, follow_redirects=False)
    assert page.status_code == 200
    target = _continue_target(page.text)
    # a browser drops tabs and line breaks from a URL: what it would follow must stay on this site
    followed = "".join(c for c in target if c not in "\t\n\r")
    assert followed.startswith("/") and not followed.startswith("//") and urlparse(followed).netloc == ""
    assert target == "/"


def test_a_callback_that_did_not_start_here_shows_none_of_its_error_text(
    console: tuple[TestClient, Provider], store: Store
) -> None:
    client, _ = console
    lure = "Your account is locked: call the helpdesk at +1 555 0100"
    r = client.get("/auth/callback", params={"error": "access_denied", "error_description": lure})
    assert r.status_code == 400 and "did not start here" in r.text and "555" not in r.text
    details = [e.detail or "" for e in access_log.since(store.con, datetime(2000, 1, 1, tzinfo=UTC), ("login_failed",))]
    assert details and "did not start here" in details[-1] and not any("555" in d for d in details)
    started = client.get("/auth/login", follow_redirects=False)
    state = parse_qs(urlparse(started.headers["location"]).query)["state"][0]
    r = client.get("/auth/callback", params={"error": "access_denied", "error_description": "no", "state": state})
    assert r.status_code == 403 and "the directory refused the sign-in: access_denied" in r.text


def _id_token(provider: Provider, header: dict[str, Any], key: Any, **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": "dealtrail", "iat": now, "exp": now + 300, "nonce": provider.nonce, **MEG}
    body.update(claims)
    return jwt.encode(header, {k: v for k, v in body.items() if v is not None}, key)


class ForgingProvider(Provider):
    """A directory whose token endpoint answers with the ID token :attr:`forge` makes."""

    forge: Any = None

    def transport(self) -> httpx.MockTransport:
        base = super().transport()

        def answer(request: httpx.Request) -> httpx.Response:
            if request.url.path.endswith("/token"):
                return httpx.Response(200, json={"id_token": self.forge(self), "token_type": "Bearer"})
            return base.handle_request(request)

        return httpx.MockTransport(answer)


def _id_token(p: Provider, header: dict[str, Any], key: Any, **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": "dealtrail", "iat": now, "exp": now + 300, "nonce": p.nonce, **MEG, **claims}
    return jwt.encode(header, {k: v for k, v in body.items() if v is not None}, key)


def _unsigned(p: Provider) -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    now = int(time.time())
    body = {"iss": ISSUER, "aud": "dealtrail", "iat": now, "exp": now + 300, "nonce": p.nonce, **MEG}
    return part({"alg": "none", "kid": "k1"}) + "." + part(body) + "."


RS256 = {"alg": "RS256", "kid": "k1"}
SECRET = OctKey.import_key(b"s" * 32)  # the client secret as an HMAC key: a confused verifier's


@pytest.mark.parametrize(
    "forge",
    [
        lambda p: _id_token(p, RS256, KEY, iss="https://evil.test/realms/casino"),
        lambda p: _id_token(p, RS256, KEY, aud="another-app"),
        lambda p: _id_token(p, RS256, KEY, aud=["dealtrail", "another-app"], azp="another-app"),
        lambda p: _id_token(p, RS256, KEY, exp=int(time.time()) - 3600),
        lambda p: _id_token(p, RS256, KEY, iat=int(time.time()) + 3600),
        lambda p: _id_token(p, RS256, KEY, nonce=None),
        lambda p: _id_token(p, RS256, KEY, sub=None),
        lambda p: _id_token(p, RS256, OTHER),
        lambda p: _id_token(p, {"alg": "HS256", "kid": "k1"}, SECRET),
        _unsigned,
    ],
    ids=["issuer", "audience", "azp", "expired", "future", "no-nonce", "no-sub", "other-key", "hs256", "none"],
)
def test_a_forged_or_stale_id_token_is_refused(store: Store, forge: Any) -> None:
    provider = ForgingProvider()
    provider.forge = forge
    app = create_app(store, ConsoleConfig(DUE, "t" * 48, directory=config()))
    app.state.console.directory = Directory(config(), provider.transport())
    client = TestClient(app)
    r = signed_in_through(client, provider)
    assert r.status_code == 403 and ("not valid" in r.text or "another client" in r.text)
    assert client.get("/findings", follow_redirects=False).status_code == 303  # no session
    assert users.user(store.con, "meg") is None


def test_a_logout_token_replayed_after_the_replay_window_is_still_refused() -> None:
    d = Directory(config(), transport())
    now = time.time()
    token = logout_token(iat=int(now))
    d.logout_claims(token, now)
    for later in (now + 700, now + 2 * 3600):  # its jti kept, then forgotten: refused either way
        with pytest.raises(RefusedError, match=r"used before|issued more than 600 seconds ago"):
            d.logout_claims(token, later)
    with pytest.raises(RefusedError, match="issued more than 600 seconds ago"):
        d.logout_claims(logout_token(iat=int(now) - 3600), now)  # an old token never used
    assert d.logout_claims(logout_token(iat=int(now) - 300), now)["sub"] == "f00d-meg"


def test_a_back_channel_logout_by_session_id_alone_ends_that_session(
    console: tuple[TestClient, Provider], store: Store
) -> None:
    client, provider = console
    assert signed_in_through(client, provider, **MEG, sid="kc-9").status_code == 200
    assert client.get("/findings").status_code == 200
    r = client.post("/auth/backchannel-logout", data={"logout_token": logout_token(sub=None, sid="kc-9")})
    assert r.status_code == 200
    assert client.get("/findings", follow_redirects=False).status_code == 303


def test_an_admin_cannot_give_a_directory_person_a_password_by_adding_them_again(store: Store) -> None:
    from dealtrail.console import auth
    from dealtrail.console.oidc import person_of

    auth.add_user(store.con, "ada", "admin", "ada-local-password", AT)
    person_of(store.con, config(), {"iss": ISSUER, **MEG}, AT)  # meg, a manager through the directory
    app = create_app(store, ConsoleConfig(DUE, "t" * 48, directory=config(local_accounts=True)))
    admin = TestClient(app)
    csrf = admin.get("/login").text.split('name="csrf" value="')[1].split('"', maxsplit=1)[0]
    admin.post("/login", data={"username": "ada", "password": "ada-local-password", "csrf": csrf})
    csrf = admin.get("/admin/users").text.split('name="csrf" value="')[1].split('"', maxsplit=1)[0]
    r = admin.post("/admin/users", data={"csrf": csrf, "op": "add", "name": "meg", "role": "admin"})
    assert r.status_code == 422 and "signs in through the directory" in r.text
    assert 'id="one-time-password"' not in r.text
    u = users.user(store.con, "meg")
    assert u is not None and u["password_hash"] is None and u["role"] == "manager"
    with pytest.raises(auth.AccessError, match="signs in through the directory"):  # the command line's way
        auth.add_user(store.con, "meg", "manager", "a-password-someone-knows", AT, one_time=True)


@pytest.mark.parametrize(
    "groups",
    [
        ["Compliance-Managers"],
        [" compliance-managers"],
        ["compliance-managers "],
        ["compliance\u2010managers"],  # a Unicode hyphen
        ["compliance-managers,dealtrail-admins"],
        "floor-reviewers compliance-managers",
        {"compliance-managers": True},
    ],
)
def test_a_group_name_that_only_looks_like_a_mapped_one_grants_nothing(store: Store, groups: Any) -> None:
    from dealtrail.console.oidc import person_of

    with pytest.raises(RefusedError, match="no group that dealtrail maps"):
        person_of(store.con, config(), {"iss": ISSUER, **MEG, "groups": groups}, AT)
    # one group as a string (AD FS sends a single group so) is that group, nothing more
    one = person_of(store.con, config(), {"iss": ISSUER, **MEG, "groups": "floor-reviewers"}, AT)
    assert one.role == "reviewer"


def test_a_reset_ends_the_sessions_and_api_tokens_made_before_it(store: Store) -> None:
    from dealtrail.console import auth

    auth.add_user(store.con, "bea", "manager", "bea-own-password", AT)
    client = TestClient(create_app(store, ConsoleConfig(DUE, "t" * 48)))
    csrf = client.get("/login").text.split('name="csrf" value="')[1].split('"', maxsplit=1)[0]
    client.post("/login", data={"username": "bea", "password": "bea-own-password", "csrf": csrf})
    token = auth.new_token(store.con, "bea", AT)
    bearer = {"Authorization": f"Bearer {token}"}
    assert client.get("/findings").status_code == 200 and client.get("/api/v1/findings", headers=bearer).is_success
    auth.reset_password(store.con, "bea", "manager", AT, "ada")
    assert client.get("/findings", follow_redirects=False).status_code == 303
    assert client.get("/api/v1/findings", headers=bearer).status_code == 401


def test_the_access_log_keeps_no_code_state_nonce_token_or_password(
    console: tuple[TestClient, Provider], store: Store
) -> None:
    from dealtrail.console import auth

    client, provider = console
    r = client.get("/auth/login", follow_redirects=False)
    query = parse_qs(urlparse(r.headers["location"]).query)
    state, nonce = query["state"][0], query["nonce"][0]
    provider.nonce, provider.claims = nonce, MEG
    assert client.get("/auth/callback", params={"code": "c0de-SECRET-1", "state": state}).status_code == 200
    provider.claims = {**MEG, "nonce": "n0nce-SECRET-2"}  # refused: another nonce
    assert signed_in_through(TestClient(client.app), provider).status_code == 403
    bad = logout_token(nonce="n0nce-SECRET-3")
    assert client.post("/auth/backchannel-logout", data={"logout_token": bad}).status_code == 400
    token = auth.new_token(store.con, "meg", AT)
    assert client.get("/api/v1/findings", headers={"Authorization": f"Bearer {token}x"}).status_code == 401
    _, one_time, _ = auth.reset_password(store.con, "rita", "reviewer", AT, "ada")
    rows = store.con.execute("SELECT * FROM access_log").fetchall()
    text = " ".join(str(v) for row in rows for v in row)
    assert "directory" in text and "login_succeeded" in text  # the entries are there
    for secret in ("c0de-SECRET-1", state, nonce, "SECRET-2", "SECRET-3", bad[:40], token, one_time):
        assert secret not in text


def test_bad_logout_tokens_do_not_make_the_console_read_the_directorys_keys_each_time(store: Store) -> None:
    import httpx

    from tests.integration.test_directory_tokens import OTHER as FOREIGN

    reads: list[str] = []
    base = transport()

    def counting(request: httpx.Request) -> httpx.Response:
        reads.append(request.url.path)
        return base.handle_request(request)

    app = create_app(store, ConsoleConfig(DUE, "t" * 48, directory=config()))
    app.state.console.directory = Directory(config(), httpx.MockTransport(counting))
    client = TestClient(app)
    for _ in range(20):  # anyone may post to the back-channel endpoint
        r = client.post("/auth/backchannel-logout", data={"logout_token": logout_token(key=FOREIGN)})
        assert r.status_code == 400
    assert reads.count("/realms/casino/certs") <= 2
    assert client.post("/auth/backchannel-logout", data={"logout_token": logout_token()}).status_code == 200


@pytest.mark.parametrize("step", ["code", "enrol"])
def test_a_back_channel_logout_while_the_one_time_code_is_awaited_starts_no_session(store: Store, step: str) -> None:
    import pyotp

    from dealtrail.console.guard import SecurityPolicy
    from dealtrail.console.oidc import person_of

    provider = Provider()
    policy = SecurityPolicy(totp_roles=frozenset({"manager"}))
    app = create_app(store, ConsoleConfig(DUE, "t" * 48, directory=config(), security=policy))
    app.state.console.directory = Directory(config(), provider.transport())
    meg = {**MEG, "amr": ["pwd"], "sid": "kc-1"}  # no second factor at the directory
    person_of(store.con, config(), {"iss": ISSUER, **meg}, AT)
    secret = pyotp.random_base32()
    if step == "code":
        access_log.put_totp(store.con, "meg", secret, AT, app.state.console.totp_key)
    client = TestClient(app)
    r = signed_in_through(client, provider, **meg)
    assert r.headers["location"] == ("/auth/code" if step == "code" else "/account/totp")
    # the directory signs meg out (a leaver) while the console waits for her one-time code
    assert (
        client.post("/auth/backchannel-logout", data={"logout_token": logout_token(sub="f00d-meg")}).status_code == 200
    )
    page = client.get(r.headers["location"]).text
    csrf = page.split('name="csrf" value="')[1].split('"', maxsplit=1)[0]
    if step == "code":
        done = client.post("/auth/code", data={"csrf": csrf, "code": pyotp.TOTP(secret).now()})
    else:
        shown = page.split("Key: <code>")[1].split("<", maxsplit=1)[0].strip()
        done = client.post("/account/totp", data={"csrf": csrf, "code": pyotp.TOTP(shown).now()})
    assert done.status_code == 403 and "signed you out" in done.text
    assert client.get("/findings", follow_redirects=False).status_code == 303


@pytest.mark.parametrize("then", ["password", "enrol"])
def test_every_local_sign_in_beside_the_directory_is_flagged_whatever_its_last_step(store: Store, then: str) -> None:
    import pyotp

    from dealtrail.console import auth
    from dealtrail.console.guard import SecurityPolicy

    policy = SecurityPolicy(totp_roles=frozenset({"admin"} if then == "enrol" else set()))
    app = create_app(store, ConsoleConfig(DUE, "t" * 48, directory=config(local_accounts=True), security=policy))
    _, one_time, _ = auth.reset_password(store.con, "bea", "admin", AT, "ada")  # the break-glass account
    client = TestClient(app)

    def csrf(page: str) -> str:
        return page.split('name="csrf" value="')[1].split('"', maxsplit=1)[0]

    r = client.post("/login", data={"username": "bea", "password": one_time, "csrf": csrf(client.get("/login").text)})
    assert r.url.path == "/account/password"
    new = {"current": one_time, "new": "bea-own-password", "repeated": "bea-own-password"}
    r = client.post("/account/password", data={**new, "csrf": csrf(r.text)})
    if then == "enrol":
        assert r.url.path == "/account/totp"
        shown = r.text.split("Key: <code>")[1].split("<", maxsplit=1)[0].strip()
        r = client.post("/account/totp", data={"csrf": csrf(r.text), "code": pyotp.TOTP(shown).now()})
    assert r.status_code == 200 and client.get("/findings").status_code == 200
    kinds = [e.kind for e in access_log.since(store.con, AT, ("login_break_glass", "login_succeeded"))]
    assert kinds == ["login_break_glass", "login_succeeded"]
