"""The directory sign-in's checks without a provider (issue 48, item 1): logout tokens checked as
OpenID Connect Back-Channel Logout 1.0 says, the group-to-role mapping (admin only through a named
admin group; no mapped group refused), accounts made on first sign-in and keyed by issuer +
subject, the login step's own SameSite=Lax cookie beside the strict session cookie, and local
accounts as break-glass (off by default with a directory; each use flagged). The directory's
keys and discovery document are served by an httpx mock transport; the JWTs are signed with a
key made here (joserfc)."""

from __future__ import annotations

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
from joserfc.jwk import RSAKey

from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.console.oidc import BACKCHANNEL_EVENT, Directory, DirectoryConfig, RefusedError, person_of
from projections.models.reviews import ReviewDue
from projections.records import access_log, users
from projections.store.store import Store

ISSUER = "https://idp.casino.test/realms/casino"
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1", "use": "sig", "alg": "RS256"})
OTHER = RSAKey.generate_key(2048, parameters={"kid": "k1", "use": "sig", "alg": "RS256"})
DUE = ReviewDue(24, 24, 72)
AT = datetime(2026, 12, 1, tzinfo=UTC)
MAPPING = {"reviewer": frozenset({"floor-reviewers"}), "manager": frozenset({"compliance-managers"})}


def transport() -> httpx.MockTransport:
    meta = {
        "issuer": ISSUER,
        "authorization_endpoint": ISSUER + "/auth",
        "token_endpoint": ISSUER + "/token",
        "jwks_uri": ISSUER + "/certs",
    }

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/.well-known/openid-configuration"):
            return httpx.Response(200, json=meta)
        if request.url.path.endswith("/certs"):
            return httpx.Response(200, json={"keys": [KEY.as_dict(private=False)]})
        return httpx.Response(404)

    return httpx.MockTransport(answer)


def config(**kw: Any) -> DirectoryConfig:
    return DirectoryConfig(issuer=ISSUER, client_id="dealtrail", client_secret="s", role_groups=MAPPING, **kw)


def logout_token(key: RSAKey = KEY, typ: str | None = "logout+jwt", **claims: Any) -> str:
    body: dict[str, Any] = {
        "iss": ISSUER,
        "aud": "dealtrail",
        "iat": int(time.time()),
        "jti": f"j-{time.monotonic_ns()}",
        "sub": "f00d-meg",
        "sid": "kc-session-1",
        "events": {BACKCHANNEL_EVENT: {}},
    }
    body.update(claims)
    body = {k: v for k, v in body.items() if v is not None}
    header = {"alg": "RS256", "kid": "k1", **({"typ": typ} if typ else {})}
    return jwt.encode(header, body, key)


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (lambda: logout_token(key=OTHER), "not a logout token of the directory"),
        (lambda: logout_token(typ="JWT"), "not logout\\+jwt"),
        (lambda: logout_token(aud="someone-else"), "not valid"),
        (lambda: logout_token(iss="https://evil.test"), "not valid"),
        (lambda: logout_token(events=None), "no back-channel logout event"),
        (lambda: logout_token(events={"other": {}}), "no back-channel logout event"),
        (lambda: logout_token(nonce="n"), "must not carry a nonce"),
        (lambda: logout_token(sub=None, sid=None), "neither a subject nor a session"),
        (lambda: logout_token(jti=None), "not valid"),
    ],
)
def test_a_logout_token_that_back_channel_logout_forbids_is_refused(token: Any, why: str) -> None:
    d = Directory(config(), transport())
    with pytest.raises(RefusedError, match=why):
        d.logout_claims(token(), time.time())


def test_a_logout_token_is_good_once() -> None:
    d = Directory(config(), transport())
    token = logout_token()
    assert d.logout_claims(token, time.time())["sub"] == "f00d-meg"
    with pytest.raises(RefusedError, match="used before"):
        d.logout_claims(token, time.time())


def test_groups_map_to_the_highest_role_and_admin_only_through_a_named_admin_group() -> None:
    c = config()
    assert c.role_of(["floor-reviewers", "compliance-managers"]) == "manager"
    assert c.role_of(["floor-reviewers"]) == "reviewer"
    assert c.role_of(["cafeteria", "Domain Admins"]) is None  # no mapping grants admin unless named
    named = DirectoryConfig(
        issuer=ISSUER, client_id="dealtrail", role_groups={**MAPPING, "admin": frozenset({"dealtrail-admins"})}
    )
    assert named.role_of(["compliance-managers", "dealtrail-admins"]) == "admin"
    assert c.second_factor({"amr": ["pwd", "otp"]}) and not c.second_factor({"amr": ["pwd"], "acr": "1"})
    assert config(mfa_acr=frozenset({"2"})).second_factor({"acr": "2"})


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "d.duckdb")
    yield s
    s.close()


def test_a_person_is_issuer_and_subject_the_first_sign_in_makes_the_account_and_no_group_is_refused(
    store: Store,
) -> None:
    auth.add_user(store.con, "meg", "viewer", "a-local-password", AT)  # a local account of that name
    claims = {"iss": ISSUER, "sub": "f00d-meg", "preferred_username": "Meg", "groups": ["compliance-managers"]}
    first = person_of(store.con, config(), claims, AT)
    assert (first.user_name, first.role) == ("Meg-2", "manager")  # never the local "meg" (one person each)
    renamed = {**claims, "preferred_username": "margaret", "groups": ["floor-reviewers"]}
    again = person_of(store.con, config(), renamed, AT)
    assert (again.user_name, again.role) == ("Meg-2", "reviewer")  # the same person: issuer + subject
    u = users.user(store.con, "Meg-2")
    assert u is not None and u["role"] == "reviewer" and u["password_hash"] is None  # no local password
    with pytest.raises(RefusedError, match="no group that dealtrail maps to a role"):
        person_of(store.con, config(), {**claims, "sub": "beef-carl", "groups": ["cafeteria"]}, AT)
    assert users.user(store.con, "carl") is None


def console_for(store: Store, **directory: Any) -> TestClient:
    app = create_app(store, ConsoleConfig(DUE, "t" * 48, directory=config(**directory)))
    app.state.console.directory = Directory(config(**directory), transport())
    return TestClient(app)


def test_the_login_step_has_its_own_lax_cookie_and_a_callback_without_it_is_refused(store: Store) -> None:
    client = console_for(store)
    r = client.get("/auth/login?next=/findings", follow_redirects=False)
    assert r.status_code == 303
    query = parse_qs(urlparse(r.headers["location"]).query)
    assert query["code_challenge_method"] == ["S256"] and query["client_id"] == ["dealtrail"]
    assert query["response_type"] == ["code"] and "nonce" in query and "openid" in query["scope"][0].split()
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("dealtrail_login=") and "SameSite=lax" in cookie and "HttpOnly" in cookie
    assert "Path=/auth/callback" in cookie and "Max-Age=600" in cookie
    stranger = TestClient(client.app)  # the callback in a browser that did not start the login
    refused = stranger.get("/auth/callback", params={"code": "c", "state": query["state"][0]})
    assert refused.status_code == 400 and "did not start here" in refused.text
    forged = client.get("/auth/callback", params={"code": "c", "state": "not-the-state"})
    assert forged.status_code == 400


def test_local_accounts_are_off_with_a_directory_and_a_break_glass_sign_in_is_flagged(store: Store) -> None:
    auth.add_user(store.con, "ada", "admin", "ada-local-password", AT)
    off = console_for(store)
    page = off.get("/login").text
    assert "Sign in with your directory" in page and 'name="password"' not in page
    csrf = page.split('name="csrf" value="')[1].split('"')[0]
    r = off.post("/login", data={"username": "ada", "password": "ada-local-password", "csrf": csrf})
    assert r.status_code == 403 and "Local accounts are off" in r.text
    glass = console_for(store, local_accounts=True)
    page = glass.get("/login").text
    assert "break-glass" in page and 'name="password"' in page
    csrf = page.split('name="csrf" value="')[1].split('"')[0]
    r = glass.post("/login", data={"username": "ada", "password": "ada-local-password", "csrf": csrf})
    assert r.status_code == 200 and "ada" in r.text
    kinds = [e.kind for e in access_log.since(store.con, AT, ("login_break_glass", "login_succeeded", "login_failed"))]
    assert kinds == ["login_failed", "login_break_glass", "login_succeeded"]


def test_a_back_channel_logout_ends_the_persons_sessions_and_a_bad_token_gets_400(store: Store) -> None:
    claims = {"iss": ISSUER, "sub": "f00d-meg", "preferred_username": "meg", "groups": ["compliance-managers"]}
    person_of(store.con, config(), claims, AT)
    for sid in ("s1", "s2"):
        access_log.start_session(store.con, sid, "meg", AT, None, "kc-session-1")
    client = console_for(store)
    assert client.post("/auth/backchannel-logout", data={"logout_token": logout_token(key=OTHER)}).status_code == 400
    assert all(not access_log.session(store.con, sid)["ended"] for sid in ("s1", "s2"))  # type: ignore[index]
    r = client.post("/auth/backchannel-logout", data={"logout_token": logout_token()})
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    assert all(access_log.session(store.con, sid)["ended"] for sid in ("s1", "s2"))  # type: ignore[index]


def test_an_admin_cannot_give_a_directory_person_a_password(store: Store) -> None:
    auth.add_user(store.con, "ada", "admin", "ada-local-password", AT)
    claims = {"iss": ISSUER, "sub": "f00d-meg", "preferred_username": "meg", "groups": ["compliance-managers"]}
    person_of(store.con, config(), claims, AT)
    admin = console_for(store, local_accounts=True)
    csrf = admin.get("/login").text.split('name="csrf" value="')[1].split('"')[0]
    admin.post("/login", data={"username": "ada", "password": "ada-local-password", "csrf": csrf})
    csrf = admin.get("/admin/users").text.split('name="csrf" value="')[1].split('"')[0]
    r = admin.post("/admin/users", data={"csrf": csrf, "op": "password", "name": "meg"})
    assert r.status_code == 422 and "signs in through the directory" in r.text
    u = users.user(store.con, "meg")
    assert u is not None and u["password_hash"] is None


class Provider:
    """A directory for the callback's tests: the mock transport answers the token endpoint with an
    ID token of ``claims`` (the nonce the login sent added), signed with :data:`KEY`."""

    def __init__(self) -> None:
        self.claims: dict[str, Any] = {}
        self.nonce = ""
        self.forms: list[dict[str, list[str]]] = []

    def transport(self) -> httpx.MockTransport:
        base = transport()

        def answer(request: httpx.Request) -> httpx.Response:
            if request.url.path.endswith("/token"):
                self.forms.append(parse_qs(request.content.decode()))
                now = int(time.time())
                body = {"iss": ISSUER, "aud": "dealtrail", "iat": now, "exp": now + 300, "nonce": self.nonce}
                token = jwt.encode({"alg": "RS256", "kid": "k1"}, {**body, **self.claims}, KEY)
                return httpx.Response(200, json={"id_token": token, "access_token": "a", "token_type": "Bearer"})
            return base.handle_request(request)

        return httpx.MockTransport(answer)


def signed_in_through(client: TestClient, provider: Provider, **claims: Any) -> httpx.Response:
    r = client.get("/auth/login?next=/findings", follow_redirects=False)
    query = parse_qs(urlparse(r.headers["location"]).query)
    provider.nonce, provider.claims = query["nonce"][0], claims
    return client.get("/auth/callback", params={"code": "c0de", "state": query["state"][0]}, follow_redirects=False)


@pytest.fixture()
def provider_console(store: Store) -> tuple[TestClient, Provider]:
    from dealtrail.console.guard import SecurityPolicy

    provider = Provider()
    cfg = ConsoleConfig(DUE, "t" * 48, directory=config(), security=SecurityPolicy(totp_roles=frozenset({"manager"})))
    app = create_app(store, cfg)
    app.state.console.directory = Directory(config(), provider.transport())
    return TestClient(app), provider


def test_the_directorys_second_factor_counts_else_the_consoles_own_code_is_asked(
    store: Store, provider_console: tuple[TestClient, Provider]
) -> None:
    import pyotp

    client, provider = provider_console
    meg = {"sub": "f00d-meg", "preferred_username": "meg", "groups": ["compliance-managers"]}
    r = signed_in_through(client, provider, **meg, amr=["pwd", "otp"])
    assert r.status_code == 200 and 'content="0;url=/findings"' in r.text  # goes on, on the console's own site
    form = provider.forms[-1]
    assert form["grant_type"] == ["authorization_code"] and len(form["code_verifier"][0]) >= 43  # PKCE
    page = client.get("/findings")
    assert page.status_code == 200 and "meg" in page.text and "manager" in page.text
    # without a second factor at the directory, a manager (a TOTP role) enrols the console's own
    other = TestClient(client.app)
    r = signed_in_through(other, provider, **meg, amr=["pwd"])
    assert r.status_code == 303 and r.headers["location"] == "/account/totp"
    assert other.get("/findings", follow_redirects=False).status_code == 303  # no session yet
    secret = pyotp.random_base32()
    access_log.put_totp(store.con, "meg", secret, AT, client.app.state.console.totp_key)  # type: ignore[attr-defined]
    third = TestClient(client.app)
    r = signed_in_through(third, provider, **meg, amr=["pwd"])
    assert r.status_code == 303 and r.headers["location"] == "/auth/code"
    csrf = third.get("/auth/code").text.split('name="csrf" value="')[1].split('"')[0]
    assert third.post("/auth/code", data={"csrf": csrf, "code": "000000"}).status_code == 401
    done = third.post("/auth/code", data={"csrf": csrf, "code": pyotp.TOTP(secret).now()}, follow_redirects=False)
    assert done.status_code == 200 and third.get("/findings").status_code == 200
    how = store.con.execute(
        "SELECT DISTINCT signed_in_with FROM console_sessions WHERE kind = 'started' AND user_name = 'meg'"
    ).fetchall()
    assert how == [(f'{{"method":"directory","issuer":"{ISSUER}","subject":"f00d-meg"}}',)]


def test_an_id_token_with_another_nonce_or_audience_is_refused(provider_console: tuple[TestClient, Provider]) -> None:
    client, provider = provider_console
    meg = {"sub": "f00d-meg", "preferred_username": "meg", "groups": ["compliance-managers"], "amr": ["mfa"]}
    r = signed_in_through(client, provider, **meg, nonce="replayed")
    assert r.status_code == 403 and "not valid" in r.text
    r = signed_in_through(TestClient(client.app), provider, **meg, aud="another-app")
    assert r.status_code == 403 and "not valid" in r.text
