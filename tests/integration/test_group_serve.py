"""The group view served (issue 51, ``dealtrail group serve``): a read-only web view of the
properties' exports, verified as ``group report`` verifies them. A director sees every property;
a property's manager only hers (another answers 404); a page without a session leads to sign-in;
a property whose export fails verification is shown failing with its reason; page text is
escaped; nothing in the exports is written. Two small properties (2 tables, 45 minutes each):
``north`` verifies, ``river`` has one byte altered in its second gaming day, ``ghost`` has a
registered key and no export."""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from dealtrail.cli import app as cli
from dealtrail.console.auth import hash_password
from dealtrail.console.group_view import (
    GroupReader,
    GroupUsersError,
    create_group_app,
    load_group_users,
)
from dealtrail.console.guard import SecurityPolicy
from dealtrail.reporting.exports import day_period, export_day
from dealtrail.reporting.group import read_group, registered_keys
from dealtrail.reporting.objectstore import Location, open_location
from dealtrail.simulator.floor import FloorSpec, simulate
from projections.models.reviews import ReviewDue
from projections.records.signing import create_key, load_key, public_pem
from projections.store.store import Store, connect_read_only
from schemas.codec import encode
from tests.helpers import need_browser, served_app

DAYS = ("2026-11-01", "2026-11-02")
NOW = datetime(2026, 11, 4, 12, 0, tzinfo=UTC)
PASSWORDS = {"dana": "director-pass-1", "mia": "manager-pass-1"}
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-sync", "--no-first-run"]


@dataclass(frozen=True)
class Group:
    """The exports, the registered keys and the users file of the small group."""

    location: Location
    keys: Path
    users: Path
    root: Path


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Group:
    """The small group (:func:`make_group`)."""
    return make_group(tmp_path_factory.mktemp("group-serve"))


def make_group(root: Path) -> Group:
    """``north`` (New York, named with markup) and ``river`` (UTC) in ``root``, each simulated from
    23:15 local on the first day, audited and exported for both days; one byte of river's second
    day altered; ``ghost`` registered without an export."""
    from dealtrail.ingest.audit import audit_file

    location = open_location(str(root / "exports"))
    keys = root / "keys"
    keys.mkdir()
    for property_id, zone, name, seed in (
        ("north", "America/New_York", "<b>North</b> & Co", 21),
        ("river", "UTC", None, 22),
    ):
        folder = root / property_id
        folder.mkdir()
        start = datetime(2026, 11, 1, 23, 15, tzinfo=ZoneInfo(zone)).astimezone(UTC)
        events = folder / "events.jsonl"
        floor = FloorSpec(tables=2, hours=0.75, seed=seed, error_rate=0.3, start=start)
        events.write_bytes(b"".join(encode(e) + b"\n" for e in simulate(floor)))
        db = folder / "store.duckdb"
        with Store(db) as store:
            audit_file(events, store)
        create_key(folder / "signing.pem")
        key = load_key(folder / "signing.pem")
        (keys / f"{property_id}.pem").write_bytes(public_pem(key))
        con = connect_read_only(db)
        try:
            for day in DAYS:
                export_day(
                    con, location, property_id, day_period(day, zone), zone, key, NOW, ReviewDue(24, 24, 72), name
                )
        finally:
            con.close()
    create_key(root / "ghost.pem")
    (keys / "ghost.pem").write_bytes(public_pem(load_key(root / "ghost.pem")))
    altered = root / "exports" / "property=river" / "gaming_day=2026-11-02" / "revision=0001" / "figures.parquet"
    data = bytearray(altered.read_bytes())
    data[len(data) // 2] ^= 0x01
    altered.chmod(0o600)
    altered.write_bytes(bytes(data))
    users = root / "group-users.json"
    users.write_text(
        json.dumps(
            {
                "users": [
                    {"name": "dana", "role": "director", "password_hash": hash_password(PASSWORDS["dana"])},
                    {
                        "name": "mia",
                        "role": "manager",
                        "properties": ["north"],
                        "password_hash": hash_password(PASSWORDS["mia"]),
                    },
                ]
            }
        ),
        encoding="utf-8",
    )
    users.chmod(0o600)
    return Group(location, keys, users, root)


def _app(group: Group, lines: list[str] | None = None, now: datetime = NOW) -> Any:
    reader = GroupReader(group.location, group.keys, timedelta(seconds=60), lambda: now)
    return create_group_app(
        reader,
        load_group_users(group.users),
        "s" * 48,
        SecurityPolicy(),
        echo=lines.append if lines is not None else lambda _: None,
    )


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match, html[:500]
    return match.group(1)


def _signed_in(group: Group, name: str, lines: list[str] | None = None, now: datetime = NOW) -> TestClient:
    client = TestClient(_app(group, lines, now))
    token = _csrf(client.get("/login").text)
    r = client.post(
        "/login",
        data={"username": name, "password": PASSWORDS[name], "csrf": token, "next": "/"},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    return client


def _row(html: str, property_id: str) -> str:
    match = re.search(rf'<tr>\s*<th scope="row"><a href="/properties/{property_id}">.*?</tr>', html, re.S)
    assert match, f"no row of {property_id}"
    return match.group(0)


def test_every_page_without_a_session_leads_to_sign_in_and_health_carries_no_data(group: Group) -> None:
    client = TestClient(_app(group))
    for path in ("/", "/properties/north", "/?from=2026-11-01&to=2026-11-02"):
        r = client.get(path, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/login?next="), path
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json() == {"alive": True}
    page = client.get("/login")
    assert page.status_code == 200 and "Content-Security-Policy" in page.headers
    assert "<title>Sign in · dealtrail group view</title>" in page.text
    assert page.headers["X-Frame-Options"] == "DENY" and page.headers["Cache-Control"] == "no-store"


def test_a_director_sees_every_property_with_its_verified_figures_and_the_failing_one_with_its_reason(
    group: Group,
) -> None:
    client = _signed_in(group, "dana", now=NOW + timedelta(hours=30))
    r = client.get("/?from=2026-11-01&to=2026-11-02")
    assert r.status_code == 200
    html = r.text
    views = {
        v.property_id: v for v in read_group(group.location, registered_keys(group.keys), *DAYS[:1], "2026-11-03", NOW)
    }
    assert set(views) == {"north", "river", "ghost"}
    north = views["north"].summary()
    assert north["status"] == "verified" and north["rounds"] > 0 and north["incidents"] > 0
    row = _row(html, "north")
    assert "verified" in row and f">{north['rounds']:,}<" in row and f">{north['incidents']:,}<" in row
    assert f">{north['per_1000_rounds']}<" in row
    assert '11-04 12:00:00+00:00<br><span class="small">30.0 h ago</span>' in row  # freshness: exported at NOW
    river = _row(html, "river")
    assert "FAILED" in river and "1 day(s)" in river
    assert "2026-11-02: revision 1: figures.parquet does not match its SHA-256 in the manifest (altered)" in html
    assert "no export of ghost found" in html
    for rule in north["by_rule"]:
        assert f'<th scope="row">{rule}</th>' in html
    page = client.get("/properties/river?from=2026-11-01&to=2026-11-02")
    assert page.status_code == 200 and "Failing verification" in page.text and "FAILED" in page.text
    assert client.get("/properties/north").status_code == 200
    assert client.get("/properties/nowhere").status_code == 404


def test_each_property_is_charted_against_the_properties_the_reader_sees(group: Group) -> None:
    import base64

    from dealtrail.reporting.group import group_chart

    dana = _signed_in(group, "dana")
    views = read_group(group.location, registered_keys(group.keys), DAYS[0], "2026-11-03", NOW)
    judged = group_chart(views, "day")
    page = dana.get("/properties/north?from=2026-11-01&to=2026-11-02").text
    src = re.search(r'<img class="control-chart" src="data:image/svg\+xml;base64,([^"]+)" alt="Control chart of '
                    r'property north by gaming day: (\d+) points', page)  # fmt: skip
    assert src and int(src.group(2)) == sum(1 for p in judged if p["subject_id"] == "north")
    svg = base64.b64decode(src.group(1))
    assert svg.startswith(b"<svg") and b"Property north" in svg and b"<script" not in svg
    assert f"Centre line {judged[0]['u_bar']:.3f}" in page and "against the 2 properties you see" in page
    week = dana.get("/properties/north?from=2026-11-01&to=2026-11-02&slot=week").text
    assert '<b aria-current="true">by week</b>' in week and "by gaming week" in week
    floor = dana.get("/?from=2026-11-01&to=2026-11-02").text
    assert 'id="control"' in floor and f"Centre line {judged[0]['u_bar']:.3f}" in floor
    # a manager's chart is judged against her property alone: nothing of the others' figures
    mia = _signed_in(group, "mia").get("/properties/north?from=2026-11-01&to=2026-11-02").text
    alone = group_chart([v for v in views if v.property_id == "north"], "day")
    assert "this property alone" in mia and f"Centre line {alone[0]['u_bar']:.3f}" in mia


def test_a_page_never_waits_for_a_reading_once_the_period_was_read(group: Group, tmp_path: Path) -> None:
    import shutil

    shutil.copytree(group.location.root, tmp_path / "exports")
    location = open_location(str(tmp_path / "exports"))
    clock = [NOW]
    reader = GroupReader(location, group.keys, timedelta(seconds=60), lambda: clock[0])
    read_at, views = reader.views(DAYS[0], "2026-11-03")
    assert read_at == NOW and next(v for v in views if v.property_id == "north").ok
    north = tmp_path / "exports" / "property=north" / "gaming_day=2026-11-02" / "revision=0001" / "rounds.parquet"
    north.chmod(0o600)
    north.write_bytes(north.read_bytes()[:-1] + bytes([north.read_bytes()[-1] ^ 1]))
    clock[0] = NOW + timedelta(seconds=59)
    assert reader.views(DAYS[0], "2026-11-03")[0] == NOW  # within the refresh: the reading kept, nothing read
    assert not reader._reading
    clock[0] = NOW + timedelta(seconds=61)
    stale_at, stale = reader.views(DAYS[0], "2026-11-03")  # answered at once from the last reading ...
    assert stale_at == NOW and next(v for v in stale if v.property_id == "north").ok
    reader.settle()  # ... while one background thread reads again, which the next page shows
    fresh_at, fresh = reader.views(DAYS[0], "2026-11-03")
    assert fresh_at == NOW + timedelta(seconds=61)
    north_view = next(v for v in fresh if v.property_id == "north")
    assert not north_view.ok and any("rounds.parquet does not match" in p for p in north_view.problems)


def test_a_property_manager_sees_only_her_property(group: Group) -> None:
    client = _signed_in(group, "mia")
    html = client.get("/?from=2026-11-01&to=2026-11-02").text
    assert 'href="/properties/north"' in html
    assert "river" not in html and "ghost" not in html
    assert client.get("/properties/north").status_code == 200
    for other in ("river", "ghost"):
        r = client.get(f"/properties/{other}")
        assert r.status_code == 404 and "river" not in r.text.replace(f"/properties/{other}", "")


def test_page_text_from_an_export_is_escaped(group: Group) -> None:
    html = _signed_in(group, "dana").get("/properties/north").text
    assert "&lt;b&gt;North&lt;/b&gt; &amp; Co" in html and "<b>North</b>" not in html


def test_sign_in_refuses_a_wrong_password_and_a_form_without_its_token_and_logout_ends_the_session(
    group: Group,
) -> None:
    lines: list[str] = []
    client = TestClient(_app(group, lines))
    token = _csrf(client.get("/login").text)
    wrong = client.post("/login", data={"username": "dana", "password": "nope-nope-nope", "csrf": token})
    assert wrong.status_code == 401 and "Wrong name or password." in wrong.text
    assert (
        client.post("/login", data={"username": "dana", "password": PASSWORDS["dana"], "csrf": "x"}).status_code == 403
    )
    client = _signed_in(group, "dana", lines)
    cookie = client.cookies.get("dealtrail_group_session")
    floor = client.get("/")
    assert floor.status_code == 200
    out = client.post("/logout", data={"csrf": _csrf(floor.text)}, follow_redirects=False)
    assert out.status_code == 303
    replay = TestClient(client.app, cookies={"dealtrail_group_session": cookie or ""})
    assert replay.get("/", follow_redirects=False).status_code == 303  # the old cookie opens nothing
    assert any("login_failed user='dana'" in x and "refused" in x for x in lines)
    assert any("login_succeeded user='dana'" in x for x in lines) and any("logout user='dana'" in x for x in lines)
    assert not any(PASSWORDS["dana"] in x for x in lines)


def test_the_view_writes_nothing_where_it_reads(group: Group) -> None:
    before = _tree(group.root / "exports")
    client = _signed_in(group, "dana")
    for path in ("/", "/properties/north", "/properties/river", "/?from=2026-11-02&to=2026-11-02"):
        assert client.get(path).status_code == 200
    assert _tree(group.root / "exports") == before


def test_the_users_file_must_be_owner_only_and_well_formed(group: Group, tmp_path: Path) -> None:
    loose = tmp_path / "users.json"
    loose.write_text(group.users.read_text(encoding="utf-8"), encoding="utf-8")
    loose.chmod(0o644)
    with pytest.raises(GroupUsersError, match="readable by others"):
        load_group_users(loose)
    loose.chmod(0o600)
    assert {u.name: u.role for u in load_group_users(loose).values()} == {"dana": "director", "mia": "manager"}
    loose.write_text('{"users": [{"name": "x", "role": "owner", "password_hash": "$argon2id$x"}]}', encoding="utf-8")
    with pytest.raises(GroupUsersError, match="not a group users file"):
        load_group_users(loose)
    r = CliRunner().invoke(
        cli,
        ["group", "serve", "--source", str(group.root / "exports"), "--keys", str(group.keys), "--users", str(loose)],
    )
    assert r.exit_code == 2 and "not a group users file" in r.output


@pytest.mark.browser
def test_the_group_floor_in_chromium_signs_in_and_passes_axe(group: Group, tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        need_browser(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from axe_playwright_python.sync_playwright import Axe
        from playwright.sync_api import sync_playwright
    except ImportError:
        need_browser("Playwright or axe-playwright-python is not installed (make install)")
    shots = Path(os.environ.get("DEALTRAIL_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    axe = Axe()
    options = {"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]}}
    found: dict[str, list[str]] = {}
    with served_app(_app(group)) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True).new_page()
            page.goto(base + "/properties/north")
            page.fill("input[name=username]", "dana")
            page.fill("input[name=password]", PASSWORDS["dana"])
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r".*/properties/north$"))
            for name, path in (
                ("group-property", "/properties/river"),
                ("group-chart", "/properties/north?from=2026-11-01&to=2026-11-02"),
                ("group-floor", "/?from=2026-11-01"),
            ):
                page.goto(base + path)
                page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
                for v in axe.run(page, options=options).response.get("violations", []):
                    if v.get("impact") in {"serious", "critical"} or "best-practice" in v.get("tags", []):
                        found.setdefault(name, []).append(f"{v['id']} ({v['impact']}): {v['help']}")
            assert page.locator("text=FAILED").count() >= 1
        finally:
            browser.close()
    assert not found, found


def test_dealtrail_group_serve_runs_from_its_settings_on_a_chosen_port(group: Group, tmp_path: Path) -> None:
    """The command as deployed: settings from the environment, a non-default port, another zone."""
    import subprocess
    import sys
    import time

    import httpx

    from tests.helpers import free_port

    port = free_port()
    env = {
        **os.environ,
        "TZ": "Pacific/Auckland",
        "DEALTRAIL_GROUP__SOURCE": str(group.root / "exports"),
        "DEALTRAIL_GROUP__KEYS_DIR": str(group.keys),
        "DEALTRAIL_GROUP__USERS_FILE": str(group.users),
    }
    cmd = [sys.executable, "-m", "dealtrail.cli", "group", "serve", "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(base + "/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "group serve did not start"
            time.sleep(0.2)
        with httpx.Client(base_url=base) as client:
            assert client.get("/properties/north").status_code == 303
            token = _csrf(client.get("/login").text)
            r = client.post(
                "/login", data={"username": "mia", "password": PASSWORDS["mia"], "csrf": token, "next": "/"}
            )
            assert r.status_code == 303
            floor = client.get("/?from=2026-11-01&to=2026-11-02")
            assert floor.status_code == 200 and 'href="/properties/north"' in floor.text and "river" not in floor.text
            assert client.get("/properties/river").status_code == 404
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=15)
    assert f"group view: http://127.0.0.1:{port}/" in out and "login_succeeded user='mia'" in out
    assert PASSWORDS["mia"] not in out


def test_group_hash_password_prints_an_argon2id_hash_the_view_accepts() -> None:
    from dealtrail.console.auth import verify_password

    r = CliRunner().invoke(cli, ["group", "hash-password"], input="a-new-pass-9\na-new-pass-9\n")
    assert r.exit_code == 0, r.output
    digest = r.output.strip().splitlines()[-1]
    assert digest.startswith("$argon2id$") and verify_password(digest, "a-new-pass-9")
    assert "a-new-pass-9" not in r.output
    short = CliRunner().invoke(cli, ["group", "hash-password"], input="short\nshort\n")
    assert short.exit_code == 2 and "at least 10 characters" in short.output


def test_a_managers_listed_property_without_export_or_key_is_named_on_her_floor(group: Group) -> None:
    from dealtrail.console.group_view import GroupUser

    reader = GroupReader(group.location, group.keys, timedelta(seconds=60), lambda: NOW)
    lee = GroupUser("lee", hash_password("lee-manager-pass"), "manager", frozenset({"north", "lake"}))
    client = TestClient(create_group_app(reader, {"lee": lee}, "s" * 48, SecurityPolicy(), echo=lambda _: None))
    token = _csrf(client.get("/login").text)
    client.post("/login", data={"username": "lee", "password": "lee-manager-pass", "csrf": token})
    html = client.get("/").text  # the default period: the 7 gaming days up to the latest exported
    assert "Gaming days 2026-10-27 to 2026-11-02" in html
    assert "No export and no registered key for lake." in html and 'href="/properties/north"' in html
    assert "river" not in html and client.get("/properties/lake").status_code == 404


def _directory_client(group: Group) -> tuple[TestClient, dict[str, Any]]:
    """The view with the directory sign-in only; the directory is an httpx mock transport that
    issues an ID token (signed here with joserfc) for the person in ``person``; ``person["_logout"]``
    signs a logout token with the directory's key (its claims as keyword arguments)."""

    import httpx
    from joserfc import jwt
    from joserfc.jwk import RSAKey

    from dealtrail.console.group_view import GroupDirectory
    from dealtrail.console.oidc import Directory, DirectoryConfig

    issuer = "https://idp.casino.test/realms/group"
    key = RSAKey.generate_key(2048, parameters={"kid": "k1", "use": "sig", "alg": "RS256"})
    person: dict[str, Any] = {}

    def answer(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/.well-known/openid-configuration"):
            meta = {"issuer": issuer, "authorization_endpoint": issuer + "/auth", "token_endpoint": issuer + "/token"}
            return httpx.Response(200, json={**meta, "jwks_uri": issuer + "/certs"})
        if path.endswith("/certs"):
            return httpx.Response(200, json={"keys": [key.as_dict(private=False)]})
        if path.endswith("/token"):
            now = int(NOW.timestamp())  # the view's clock
            claims = {"iss": issuer, "aud": "group-view", "iat": now, "exp": now + 300, **person}
            body = {k: v for k, v in claims.items() if not k.startswith("_")}
            return httpx.Response(200, json={"id_token": jwt.encode({"alg": "RS256", "kid": "k1"}, body, key)})
        return httpx.Response(404)

    def logout(signer: RSAKey = key, **claims: Any) -> str:
        now = int(NOW.timestamp())  # the view's clock
        event = {"http://schemas.openid.net/event/backchannel-logout": {}}
        body = {"iss": issuer, "aud": "group-view", "iat": now, "jti": f"j-{time.monotonic_ns()}", "events": event}
        body |= claims
        return jwt.encode({"alg": "RS256", "kid": "k1", "typ": "logout+jwt"}, body, signer)

    config = DirectoryConfig(issuer=issuer, client_id="group-view", client_secret="s")
    directory = GroupDirectory(
        Directory(config, httpx.MockTransport(answer)),
        frozenset({"group-compliance"}),
        {"north": frozenset({"north-compliance"}), "river": frozenset({"river-compliance"})},
    )
    reader = GroupReader(group.location, group.keys, timedelta(seconds=60), lambda: NOW)
    app = create_group_app(reader, {}, "s" * 48, SecurityPolicy(), echo=lambda _: None, directory=directory)
    person["_logout"] = logout
    return TestClient(app), person


def _directory_sign_in(client: TestClient, person: dict[str, Any], sub: str, groups: list[str]) -> Any:
    from urllib.parse import parse_qs, urlparse

    start = client.get("/auth/login?next=/properties/north", follow_redirects=False)
    assert start.status_code == 303
    asked = parse_qs(urlparse(start.headers["location"]).query)
    assert asked["code_challenge_method"] == ["S256"]
    logout = person.get("_logout")
    person.clear()
    person.update({"sub": sub, "preferred_username": sub, "nonce": asked["nonce"][0], "groups": groups})
    person.update({"sid": f"kc-{sub}", "_logout": logout})
    return client.get(f"/auth/callback?code=c1&state={asked['state'][0]}", follow_redirects=False)


def test_the_directory_sign_in_gives_the_role_of_the_persons_groups(group: Group) -> None:
    client, person = _directory_client(group)
    login = client.get("/login").text
    assert 'href="/auth/login?next=' in login and 'name="password"' not in login  # no local accounts
    done = _directory_sign_in(client, person, "ruth", ["river-compliance", "cafeteria"])
    assert done.status_code == 200 and 'href="/properties/north"' in done.text, done.text  # goes on
    assert client.get("/properties/river").status_code == 200
    assert client.get("/properties/north").status_code == 404  # river's manager only
    client, person = _directory_client(group)
    _directory_sign_in(client, person, "dana", ["group-compliance"])
    html = client.get("/?from=2026-11-01&to=2026-11-02").text
    assert all(f'href="/properties/{p}"' in html for p in ("north", "river", "ghost"))
    client, person = _directory_client(group)
    refused = _directory_sign_in(client, person, "cook", ["cafeteria"])
    assert refused.status_code == 403 and "none of your directory groups is mapped" in refused.text
    assert client.get("/", follow_redirects=False).status_code == 303
    forged = client.get("/auth/callback?code=c1&state=guess", follow_redirects=False)
    assert forged.status_code == 400
    # an error of anyone's wording, in a browser that started no sign-in here, is not shown
    planted = TestClient(client.app).get("/auth/callback?error=Call+0800+now", follow_redirects=False)
    assert planted.status_code == 400 and "0800" not in planted.text


def test_a_back_channel_logout_from_the_directory_ends_the_persons_sessions(group: Group) -> None:
    from joserfc.jwk import RSAKey

    client, person = _directory_client(group)
    _directory_sign_in(client, person, "ruth", ["river-compliance"])
    other = TestClient(client.app)  # a second person, in another browser
    _directory_sign_in(other, person, "dana", ["group-compliance"])
    assert client.get("/properties/river").status_code == 200 and other.get("/").status_code == 200
    logout = person["_logout"]
    stranger = RSAKey.generate_key(2048, parameters={"kid": "k1", "use": "sig", "alg": "RS256"})
    bad = {
        "not a logout token of the directory": logout(signer=stranger, sub="ruth"),
        "must not carry a nonce": logout(sub="ruth", nonce="n"),
        "neither a subject nor a session": logout(),
    }
    for why, token in bad.items():
        refused = TestClient(client.app).post("/auth/backchannel-logout", data={"logout_token": token})
        assert refused.status_code == 400 and why in refused.text, refused.text
    assert client.get("/properties/river").status_code == 200  # nothing ended by a refused token
    token = logout(sub="ruth")
    done = TestClient(client.app).post("/auth/backchannel-logout", data={"logout_token": token})  # no cookie
    assert done.status_code == 200 and done.headers["cache-control"] == "no-store", done.text
    assert client.get("/properties/river", follow_redirects=False).status_code == 303  # to sign in again
    assert other.get("/", follow_redirects=False).status_code == 200  # dana's session stands
    again = TestClient(client.app).post("/auth/backchannel-logout", data={"logout_token": token})
    assert again.status_code == 400  # a token is good once
    # by the directory's session alone
    ended = TestClient(client.app).post("/auth/backchannel-logout", data={"logout_token": logout(sid="kc-dana")})
    assert ended.status_code == 200 and other.get("/", follow_redirects=False).status_code == 303


def test_a_session_ends_when_idle_and_a_form_from_another_site_is_refused(group: Group) -> None:
    clock = [NOW]
    reader = GroupReader(group.location, group.keys, timedelta(seconds=60), lambda: clock[0])
    policy = SecurityPolicy(session_idle=timedelta(minutes=30))
    app = create_group_app(reader, load_group_users(group.users), "s" * 48, policy, echo=lambda _: None)
    client = TestClient(app)
    token = _csrf(client.get("/login").text)
    form = {"username": "dana", "password": PASSWORDS["dana"], "csrf": token}
    assert client.post("/login", data=form, headers={"Origin": "http://evil.example"}).status_code == 403
    assert client.post("/login", data=form, follow_redirects=False).status_code == 303
    clock[0] += timedelta(minutes=29)
    assert client.get("/", follow_redirects=False).status_code == 200
    clock[0] += timedelta(minutes=31)
    assert client.get("/", follow_redirects=False).status_code == 303


@pytest.mark.parametrize(
    "target", ["/\t/evil.test", "//evil.test", "/\\evil.test", "https://evil.test", "/\n/evil.test"]
)
def test_a_sign_in_never_leads_to_another_site(group: Group, target: str) -> None:
    # the console's own check (sessions.safe_next), shared: a browser drops tabs and line breaks
    # from a URL, so "/<TAB>/evil.test" would lead to //evil.test
    client = TestClient(_app(group))
    r = client.post(
        "/login",
        data={
            "username": "dana",
            "password": PASSWORDS["dana"],
            "csrf": _csrf(client.get("/login").text),
            "next": target,
        },
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == "/", r.headers.get("location")
