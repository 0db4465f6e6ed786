"""Signing in with the casino's directory: OpenID Connect (issue 48, item 1).

The console is a confidential client of the directory (Entra ID, Okta, AD FS, Keycloak) and uses
the authorization code flow with PKCE (S256): ``/auth/login`` sends the browser to the
directory's authorization endpoint (read from ``<issuer>/.well-known/openid-configuration``);
``/auth/callback`` takes the code back, exchanges it at the token endpoint and checks the ID
token (its signature against the directory's keys, ``iss``, ``aud``, ``exp``, ``iat`` and the
``nonce`` sent). The request's parameters are built with Authlib (``prepare_grant_uri``, the
S256 challenge); the JWTs are checked with joserfc, Authlib's JOSE library.

Cookies. The state, the nonce and the PKCE verifier wait in a cookie of their own,
``dealtrail_login``: signed, ``SameSite=Lax`` (a top-level redirect back from the directory's
site carries it), ``HttpOnly``, for ten minutes and the callback's path only; the callback clears
it. The session cookie stays ``SameSite=Strict``: a browser does not send it on the redirect back
from another site, which is why the login step cannot keep its state there.

A person is keyed by issuer + subject (``sub``), never by a display name: the first sign-in makes
a console account (a name from ``preferred_username``, made unique in its identity form) and
links it to the pair (``directory_accounts``); later sign-ins find the account by the pair. The
role follows the directory's groups on every sign-in (``groups_claim`` through the mapping in
``DEALTRAIL_DIRECTORY__*_GROUPS``: the highest mapped role; admin only through the admin groups);
a person in no mapped group is refused with a page that says why. The directory's second factor
counts when the ID token's ``amr`` or ``acr`` says it was used (``mfa_amr``, ``mfa_acr``); else a
role of ``DEALTRAIL_SECURITY__TOTP_ROLES`` needs the console's own one-time code.

Back-channel logout (OpenID Connect Back-Channel Logout 1.0): the directory posts a logout token
to ``/auth/backchannel-logout``; once checked (signature, ``typ`` ``logout+jwt`` when given,
``iss``, ``aud``, ``iat`` of the last ten minutes, the back-channel logout event, ``sub`` or
``sid``, no ``nonce``, a ``jti`` not seen before), every session of that person (or of that
directory session) ends at once, and the answer is 200; a bad token gets 400.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import duckdb
import httpx
from authlib.common.security import generate_token
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from fastapi.responses import RedirectResponse
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from projections.records import users
from projections.records.users import ROLES
from schemas.reviews import identity_key

LOGIN_COOKIE = "dealtrail_login"
"""The cookie of the login step alone (state, nonce, PKCE verifier): ``SameSite=Lax``."""
LOGIN_SECONDS = 600
"""How long a login step may take at the directory (seconds)."""

BACKCHANNEL_EVENT = "http://schemas.openid.net/event/backchannel-logout"
"""The event a logout token carries (Back-Channel Logout 1.0, section 2.4)."""
LOGOUT_MAX_AGE = 600
"""How old (by its ``iat``, seconds) a logout token may be: an older one is refused, so the ``jti``
of each token is kept only as long as it could be accepted (a replay after that is refused too)."""
LEEWAY = 60
"""Clock skew allowed between the directory and the console (seconds)."""
KEYS_REREAD_SECONDS = 60.0
"""The least time between two reads of the directory's keys (seconds): a token signed with an
unknown key makes the console read them again, but no more often than this (anyone may post a
logout token)."""
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
"""The signature algorithms accepted for ID and logout tokens (never ``none``, never a shared key)."""


def login_redirect(url: str, pending: str, secure: bool) -> RedirectResponse:
    """The redirect to the directory's ``url`` that starts a sign-in, carrying the login step's
    signed state ``pending`` in its own cookie (:data:`LOGIN_COOKIE`): ``SameSite=Lax``, since the
    redirect back from the directory's site is a top-level GET that must bring it; HTTP-only, for
    ``/auth/callback`` alone, :data:`LOGIN_SECONDS` long; ``secure``: HTTPS only."""
    response = RedirectResponse(url, status_code=303)
    response.set_cookie(
        LOGIN_COOKIE, pending, max_age=LOGIN_SECONDS, path="/auth/callback", secure=secure, httponly=True,
        samesite="lax",
    )  # fmt: skip
    return response


class DirectoryError(Exception):
    """The directory cannot be reached or answered something the console cannot use."""


class RefusedError(Exception):
    """A sign-in through the directory that the console refuses (the page says why).

    Attributes:
        reason: the words the page and the access log show.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class DirectoryConfig:
    """The directory settings, resolved (``DEALTRAIL_DIRECTORY__*``).

    Attributes:
        issuer: the directory's issuer URL.
        client_id: the console's client ID.
        client_secret: its client secret (None: a public client, PKCE alone).
        redirect_url: the callback URL the browser comes back to; None: the request's own.
        scopes: the scopes asked for.
        groups_claim: the claim that lists the groups.
        role_groups: per role, the groups that grant it.
        mfa_amr: ``amr`` values that mean a second factor was used.
        mfa_acr: ``acr`` values that mean the same.
        local_accounts: local password accounts may sign in too (the break-glass account).
        timeout: seconds a call to the directory may take.
    """

    issuer: str
    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    redirect_url: str | None = None
    scopes: tuple[str, ...] = ("openid", "profile", "email")
    groups_claim: str = "groups"
    role_groups: Mapping[str, frozenset[str]] = field(default_factory=dict)
    mfa_amr: frozenset[str] = frozenset({"mfa", "otp", "hwk", "swk", "sms"})
    mfa_acr: frozenset[str] = frozenset()
    local_accounts: bool = False
    timeout: float = 10.0

    def role_of(self, groups: list[str]) -> str | None:
        """The highest role a mapped group of ``groups`` grants, or None (no mapped group)."""
        held = set(groups)
        granted = [role for role in ROLES if self.role_groups.get(role, frozenset()) & held]
        return granted[-1] if granted else None

    def second_factor(self, claims: Mapping[str, Any]) -> bool:
        """Whether the ID token says the directory checked a second factor (``amr``, ``acr``)."""
        amr = claims.get("amr")
        used = {str(a) for a in amr} if isinstance(amr, list) else set()
        return bool(used & self.mfa_amr) or str(claims.get("acr", "")) in self.mfa_acr


@dataclass(frozen=True)
class Person:
    """Who the directory says signed in.

    Attributes:
        issuer: the directory's issuer.
        subject: the person's ``sub`` there.
        user_name: the console account linked to them.
        role: the role their groups grant now.
        second_factor: the directory checked a second factor.
        sid: the directory's session ID (``sid``), for a back-channel logout of that session.
    """

    issuer: str
    subject: str
    user_name: str
    role: str
    second_factor: bool
    sid: str | None


class Directory:
    """The directory the console signs people in with: its metadata and keys, read once and kept
    (keys read again when a token names one not known, at most once a minute), and the logout tokens seen.

    Args:
        config: the resolved settings.
        transport: an httpx transport (tests); None: the network.
    """

    def __init__(self, config: DirectoryConfig, transport: httpx.BaseTransport | None = None) -> None:
        self.config = config
        self._transport = transport
        self._meta: dict[str, Any] | None = None
        self._keys: KeySet | None = None
        self._keys_read = 0.0  # time.monotonic() of the last read of the keys
        self._lock = threading.Lock()
        self._seen_jti: dict[str, float] = {}
        self._signed_out: dict[tuple[str, str], float] = {}  # ("sub"/"sid", value) -> when

    def metadata(self) -> dict[str, Any]:
        """The directory's discovery document (read once).

        Raises:
            DirectoryError: it cannot be read, or names another issuer.
        """
        with self._lock:
            if self._meta is None:
                url = self.config.issuer.rstrip("/") + "/.well-known/openid-configuration"
                meta = self._get_json(url)
                if meta.get("issuer") != self.config.issuer:
                    raise DirectoryError(f"the discovery document names the issuer {meta.get('issuer')!r}")
                for key in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
                    if not isinstance(meta.get(key), str):
                        raise DirectoryError(f"the discovery document has no {key}")
                self._meta = meta
            return self._meta

    def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """One request to the directory, on a client of its own that is closed at once: a
        directory is asked a few times a day (discovery, keys, one token per sign-in), and a
        client kept for the console's lifetime held a socket that nothing closed.

        Raises:
            httpx.HTTPError: the request failed.
        """
        with httpx.Client(timeout=self.config.timeout, transport=self._transport, follow_redirects=False) as http:
            return http.request(method, url, **kwargs)

    def _get_json(self, url: str) -> dict[str, Any]:
        try:
            r = self._request("GET", url)
            r.raise_for_status()
            body = r.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise DirectoryError(f"cannot read {url}: {exc}") from None
        if not isinstance(body, dict):
            raise DirectoryError(f"{url} is not a JSON object")
        return body

    def keys(self, refresh: bool = False) -> KeySet:
        """The directory's signing keys (JWKS), read again with ``refresh`` (at most once in
        :data:`KEYS_REREAD_SECONDS`)."""
        if self._keys is None or (refresh and time.monotonic() - self._keys_read >= KEYS_REREAD_SECONDS):
            self._keys = KeySet.import_key_set(self._get_json(self.metadata()["jwks_uri"]))  # type: ignore[arg-type]
            self._keys_read = time.monotonic()
        return self._keys

    def _decode(self, token: str) -> jwt.Token:
        """A JWT whose signature one of the directory's keys checks (keys read again once)."""
        for refresh in (False, True):
            try:
                return jwt.decode(token, self.keys(refresh), algorithms=list(ALGORITHMS))
            except JoseError:
                if refresh:
                    raise
        raise AssertionError("unreachable")

    def login_url(self, redirect_uri: str) -> tuple[str, dict[str, str]]:
        """Where to send the browser, and what the login cookie keeps (state, nonce, verifier).

        Raises:
            DirectoryError: the discovery document cannot be read.
        """
        state, nonce, verifier = generate_token(32), generate_token(32), generate_token(64)
        url = prepare_grant_uri(
            self.metadata()["authorization_endpoint"],
            self.config.client_id,
            "code",
            redirect_uri=redirect_uri,
            scope=" ".join(dict.fromkeys(["openid", *self.config.scopes])),
            state=state,
            nonce=nonce,
            code_challenge=create_s256_code_challenge(verifier),
            code_challenge_method="S256",
        )
        return url, {"state": state, "nonce": nonce, "verifier": verifier, "redirect_uri": redirect_uri}

    def claims_of(self, code: str, pending: Mapping[str, str], now: float) -> dict[str, Any]:
        """Exchange the code (with the PKCE verifier) and check the ID token.

        Returns:
            The ID token's claims.

        Raises:
            DirectoryError: the token endpoint refused or failed.
            RefusedError: the ID token is not good (signature, issuer, audience, time, nonce).
        """
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": pending["redirect_uri"],
            "code_verifier": pending["verifier"],
        }
        secret = self.config.client_secret
        if secret is None:  # a public client: PKCE alone
            form["client_id"] = self.config.client_id
        try:
            endpoint = self.metadata()["token_endpoint"]
            if secret is None:
                r = self._request("POST", endpoint, data=form)
            else:  # client_secret_basic (RFC 6749, section 2.3.1)
                r = self._request("POST", endpoint, data=form, auth=(self.config.client_id, secret))
            body = r.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise DirectoryError(f"the token endpoint failed: {exc}") from None
        if r.status_code != 200 or not isinstance(body, dict) or not isinstance(body.get("id_token"), str):
            error = body.get("error") if isinstance(body, dict) else None
            raise DirectoryError(f"the token endpoint answered {r.status_code} ({error or 'no ID token'})")
        try:
            token = self._decode(body["id_token"])
            jwt.JWTClaimsRegistry(
                now=int(now),
                leeway=LEEWAY,
                iss={"essential": True, "value": self.config.issuer},
                aud={"essential": True, "value": self.config.client_id},
                sub={"essential": True},
                exp={"essential": True},
                iat={"essential": True},
                nonce={"essential": True, "value": pending["nonce"]},
            ).validate(token.claims)
        except (JoseError, ValueError) as exc:
            raise RefusedError(f"the directory's ID token is not valid ({exc})") from None
        aud = token.claims.get("aud")
        if isinstance(aud, list) and len(aud) > 1 and token.claims.get("azp") != self.config.client_id:
            raise RefusedError("the directory's ID token was issued to another client (azp)")
        return dict(token.claims)

    def logout_claims(self, logout_token: str, now: float) -> dict[str, Any]:
        """Check a logout token as OpenID Connect Back-Channel Logout 1.0 (section 2.6) says.

        Returns:
            Its claims (``sub`` and/or ``sid`` name whose sessions end).

        Raises:
            RefusedError: the token is not a valid logout token of this directory for this client.
        """
        try:
            token = self._decode(logout_token)
        except (JoseError, ValueError) as exc:
            raise RefusedError(f"not a logout token of the directory ({exc})") from None
        typ = token.header.get("typ")
        if typ is not None and str(typ).lower() not in ("logout+jwt", "application/logout+jwt"):
            raise RefusedError(f"the token's type is {typ!r}, not logout+jwt")
        claims = token.claims
        try:
            jwt.JWTClaimsRegistry(
                now=int(now),
                leeway=LEEWAY,
                iss={"essential": True, "value": self.config.issuer},
                aud={"essential": True, "value": self.config.client_id},
                iat={"essential": True},
                jti={"essential": True},
            ).validate(claims)
        except (JoseError, ValueError) as exc:
            raise RefusedError(f"the logout token is not valid ({exc})") from None
        events = claims.get("events")
        if not isinstance(events, dict) or not isinstance(events.get(BACKCHANNEL_EVENT), dict):
            raise RefusedError("the logout token carries no back-channel logout event")
        if "nonce" in claims:
            raise RefusedError("a logout token must not carry a nonce")
        if not isinstance(claims.get("sub"), str) and not isinstance(claims.get("sid"), str):
            raise RefusedError("the logout token names neither a subject nor a session")
        if now - claims["iat"] > LOGOUT_MAX_AGE + LEEWAY:
            raise RefusedError(f"the logout token was issued more than {LOGOUT_MAX_AGE} seconds ago")
        with self._lock:  # a logout token is good once (kept until its age refuses it anyway)
            for jti in [j for j, at in self._seen_jti.items() if now - at > LOGOUT_MAX_AGE + 2 * LEEWAY]:
                del self._seen_jti[jti]
            jti = str(claims["jti"])
            if jti in self._seen_jti:
                raise RefusedError("this logout token was used before")
            self._seen_jti[jti] = now
        return dict(claims)

    def signed_out(self, claims: Mapping[str, Any], now: float) -> None:
        """Remember that a checked logout token signed out its ``sub`` and/or ``sid`` at ``now``
        (for :meth:`signed_out_since`; kept an hour, longer than any step of a sign-in waits)."""
        with self._lock:
            for key in [k for k, at in self._signed_out.items() if now - at > 3600]:
                del self._signed_out[key]
            for kind in ("sub", "sid"):
                if isinstance(claims.get(kind), str):
                    self._signed_out[(kind, claims[kind])] = now

    def signed_out_since(self, person: Person, since: float) -> bool:
        """Whether a back-channel logout signed ``person`` (their subject, or their directory
        session) out at or after ``since``: a sign-in that waited for the console's one-time
        code since then must not start a session."""
        with self._lock:
            at = [self._signed_out.get(("sub", person.subject))]
            if person.sid:
                at.append(self._signed_out.get(("sid", person.sid)))
        return any(t is not None and t >= since for t in at)


def person_of(
    con: duckdb.DuckDBPyConnection, config: DirectoryConfig, claims: Mapping[str, Any], at: datetime
) -> Person:
    """The console account of the person an ID token names: found by issuer + subject, made on
    the first sign-in, its role set from the groups (a new revision when it changed).

    Args:
        con: the store's writer connection (the caller holds the write lock).
        config: the directory settings.
        claims: the checked ID token's claims.
        at: when (timezone-aware).

    Raises:
        RefusedError: no mapped group; the linked account was deactivated in the console.
    """
    groups_claim = claims.get(config.groups_claim)
    groups = [str(g) for g in groups_claim] if isinstance(groups_claim, list) else []
    if isinstance(groups_claim, str):
        groups = [groups_claim]
    role = config.role_of(groups)
    issuer, subject = str(claims["iss"]), str(claims["sub"])
    if role is None:
        shown = ", ".join(sorted(groups)[:20]) or "none"
        raise RefusedError(
            f"your directory account is in no group that dealtrail maps to a role (your groups: {shown}). "
            "Ask the people who run dealtrail to add you to one of its groups."
        )
    name = linked_name(con, issuer, subject)
    if name is None:
        name = _free_name(con, claims)
        users.put_user(con, name, role, None, True, at, "directory", must_change=False)
        con.execute("INSERT INTO directory_accounts VALUES (?, ?, ?, ?)", [issuer, subject, name, at]).fetchall()
    else:
        u = users.user(con, name)
        if u is None or not u["active"]:
            raise RefusedError("your dealtrail account was deactivated by an admin")
        if u["role"] != role:
            users.put_user(con, name, role, None, True, at, "directory")
    sid = claims.get("sid")
    return Person(issuer, subject, name, role, config.second_factor(claims), str(sid) if sid else None)


def linked_name(con: duckdb.DuckDBPyConnection, issuer: str, subject: str) -> str | None:
    """The console account linked to a directory person (issuer + subject), or None."""
    rows = con.execute(
        "SELECT user_name FROM directory_accounts WHERE issuer = ? AND subject = ? ORDER BY linked_at LIMIT 1",
        [issuer, subject],
    ).fetchall()
    return str(rows[0][0]) if rows else None


def directory_person(con: duckdb.DuckDBPyConnection, user_name: str) -> tuple[str, str] | None:
    """The issuer and subject a console account is linked to, or None (a local account)."""
    rows = con.execute(
        "SELECT issuer, subject FROM directory_accounts WHERE user_name = ? ORDER BY linked_at LIMIT 1", [user_name]
    ).fetchall()
    return (str(rows[0][0]), str(rows[0][1])) if rows else None


def _free_name(con: duckdb.DuckDBPyConnection, claims: Mapping[str, Any]) -> str:
    """A console name for a new directory person: ``preferred_username`` (or the e-mail's local
    part) cut to the allowed characters, unique in identity form (``-2``, ``-3`` ... added);
    ``dir-`` and a hash of the subject when neither gives one."""
    import re

    wanted = str(claims.get("preferred_username") or str(claims.get("email") or "").split("@")[0])
    base = re.sub(r"[^A-Za-z0-9._@-]", "", wanted)[:56]
    if not base:
        base = "dir-" + hashlib.sha256(f"{claims['iss']} {claims['sub']}".encode()).hexdigest()[:12]
    taken = {identity_key(u["name"]) for u in users.users(con)}
    name, n = base, 1
    while identity_key(name) in taken:
        n += 1
        name = f"{base}-{n}"
    return name
