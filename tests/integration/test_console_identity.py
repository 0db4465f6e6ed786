"""One person, one identity (issue 34): user names unique in their NFKC case-folded form on every
path that makes a user, the sign-in lock and four eyes counting that form, twins of an older
store listed by ``dealtrail users`` and flagged on the Users page."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from dealtrail.cli import app as cli
from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.console.guard import SecurityPolicy
from dealtrail.console.totp import key_file_beside, resolve_totp_key
from projections.models import reviews
from projections.models.reviews import FindingFilter, ReviewDue
from projections.records import access_log, users
from projections.store.store import Store
from schemas.access import AccessEntry
from schemas.reviews import identity_key

DUE = ReviewDue(voiding=24, integrity=24, procedural=72)
PASSWORDS = {"ada": "ada-admin-pass", "rita": "rita-review-pass", "vic": "vic-viewer-pass"}
ROLES = {"ada": "admin", "rita": "reviewer", "vic": "viewer"}
T0 = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)


class Clock:
    """A settable clock (the console's ``now``)."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[Store]:
    """An empty store with three users."""
    s = Store(tmp_path / "identity.duckdb")
    for name, role in ROLES.items():
        auth.add_user(s.con, name, role, PASSWORDS[name], T0 - timedelta(days=1))
    yield s
    s.close()


@pytest.fixture()
def clock() -> Clock:
    return Clock(T0)


def app_for(store: Store, clock: Clock, **kw: object) -> TestClient:
    return TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, clock=clock, security=SecurityPolicy()), **kw))  # type: ignore[arg-type]


def csrf_of(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m, "no CSRF field in the form"
    return m.group(1)


def attempt(client: TestClient, name: str, password: str) -> object:
    csrf = csrf_of(client.get("/login").text)
    data = {"username": name, "password": password, "csrf": csrf, "next": "/admin/users"}
    return client.post("/login", data=data, follow_redirects=False)


def login(client: TestClient, name: str) -> None:
    r = attempt(client, name, PASSWORDS[name])
    assert r.status_code == 303, r.text  # type: ignore[attr-defined]


def admin_post(client: TestClient, **data: str) -> object:
    csrf = csrf_of(client.get("/admin/users").text)
    return client.post("/admin/users", data={"csrf": csrf, **data})


def log_rows(store: Store, **where: object) -> list[dict[str, object]]:
    rows, _ = access_log.entries(store.con, access_log.LogFilter(**where), None)  # type: ignore[arg-type]
    return list(reversed(rows))


def names(store: Store) -> list[str]:
    return [str(u["name"]) for u in users.users(store.con)]


# -- 1. one identity per person -------------------------------------------------------------------


def test_identity_key_folds_case_and_compatibility_forms() -> None:
    assert identity_key("rita") == identity_key("Rita") == identity_key("RITA") == identity_key("ｒｉｔａ")
    assert identity_key("Straße") == identity_key("STRASSE")
    assert identity_key("rita") != identity_key("rita2")


def test_rita_Rita_and_RITA_are_one_person_the_second_and_third_are_refused(store: Store) -> None:
    for twin in ("Rita", "RITA"):
        with pytest.raises(auth.AccessError, match="same name as the user 'rita'"):
            auth.add_user(store.con, twin, "manager", "a-long-password", T0)
    assert names(store) == ["ada", "rita", "vic"]
    assert auth.add_user(store.con, "rita", "reviewer", "a-new-long-password", T0) is False  # rita herself: a change


def test_the_console_refuses_a_twin_name_and_keeps_the_typed_values(store: Store, clock: Clock) -> None:
    client = app_for(store, clock)
    login(client, "ada")
    r = admin_post(client, op="add", name="RITA", role="manager")
    assert r.status_code == 422 and "same name as the user" in r.text and 'value="RITA"' in r.text  # type: ignore[attr-defined]
    assert names(store) == ["ada", "rita", "vic"]
    assert log_rows(store, kind="admin_add")[-1]["outcome"] == "refused"


def test_users_add_on_the_command_line_refuses_a_twin_name(tmp_path: Path) -> None:
    db = tmp_path / "users.duckdb"
    run = CliRunner().invoke
    r = run(cli, ["users", "add", "rita", "--role", "reviewer", "--db", str(db)], input="rita-review-pass\n")
    assert r.exit_code == 0, r.output
    for twin in ("Rita", "RITA"):
        r = run(cli, ["users", "add", twin, "--role", "manager", "--db", str(db)], input="a-long-password\n")
        assert r.exit_code == 2 and "same name as the user 'rita'" in r.output, r.output
    with Store(db) as s:
        assert names(s) == ["rita"]


def test_the_lock_holds_after_ten_failures_whatever_the_case_typed(store: Store, clock: Clock) -> None:
    client = app_for(store, clock)
    statuses = []
    for n in range(10):
        r = attempt(client, ("rita", "Rita", "RITA", "ｒｉｔａ")[n % 4], "wrong password!")
        statuses.append(r.status_code)  # type: ignore[attr-defined]
        clock.now += timedelta(minutes=5)
    assert statuses == [401] * 9 + [429]
    for typed in ("rita", "RITA"):
        assert attempt(client, typed, PASSWORDS["rita"]).status_code == 429  # type: ignore[attr-defined]


def test_a_name_typed_in_another_case_signs_in_as_the_one_user(store: Store, clock: Clock) -> None:
    client = app_for(store, clock)
    assert attempt(client, "RITA", PASSWORDS["rita"]).status_code == 303  # type: ignore[attr-defined]
    assert log_rows(store, kind="login_succeeded")[-1]["user_name"] == "rita"


def _old_store_with_twins(store: Store) -> None:
    """What an older dealtrail let in: ``Rita`` (a manager) beside ``rita``."""
    users.put_user(store.con, "Rita", "manager", auth.hash_password("Rita-manager-pass"), True, T0, "cli")


def test_in_an_old_store_a_twins_good_sign_in_does_not_clear_the_others_failures(store: Store, clock: Clock) -> None:
    _old_store_with_twins(store)
    client = app_for(store, clock)
    statuses: list[int] = []
    for n in range(24):  # issue 34: three wrong guesses at rita, one good sign-in as Rita, repeated
        clock.now += timedelta(minutes=5)
        client.cookies.clear()
        if n % 4 == 3:
            statuses.append(attempt(client, "Rita", "Rita-manager-pass").status_code)  # type: ignore[attr-defined]
        else:
            statuses.append(attempt(client, "rita", "wrong password!").status_code)  # type: ignore[attr-defined]
        if statuses[-1] == 429:
            break
    assert statuses.index(429) == 12  # the 10th wrong guess locks (it took 18 and no lock before)
    restarted = app_for(store, clock)  # the count rebuilt from the access log holds as well
    assert attempt(restarted, "rita", PASSWORDS["rita"]).status_code == 429  # type: ignore[attr-defined]


def test_dealtrail_users_lists_the_twins_of_an_old_store_and_exits_3(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    with Store(db) as s:
        auth.add_user(s.con, "rita", "reviewer", PASSWORDS["rita"], T0)
        auth.add_user(s.con, "vic", "viewer", PASSWORDS["vic"], T0)
    assert CliRunner().invoke(cli, ["users", "list", "--db", str(db)]).exit_code == 0
    with Store(db) as s:
        _old_store_with_twins(s)
    for args in (["users", "--db", str(db)], ["users", "list", "--db", str(db)]):
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 3, r.output
        assert "twins (one person, several users; deactivate all but one): Rita, rita" in r.output
        assert "vic\tviewer\tactive" in r.output


def test_the_users_page_flags_the_twins_of_an_old_store(store: Store, clock: Clock) -> None:
    client = app_for(store, clock)
    login(client, "ada")
    assert 'id="twins"' not in client.get("/admin/users").text
    _old_store_with_twins(store)
    page = client.get("/admin/users").text
    assert 'id="twins"' in page and "<li>Rita, rita</li>" in page
    assert "(same person as Rita)" in page and "(same person as rita)" in page


# -- four eyes over a shared store with findings ----------------------------------------------------

FULL = {"corrective_action": "none needed", "note": "video shows the cut card"}


@pytest.fixture()
def shift(audited_shift: Path, tmp_path: Path) -> Iterator[Store]:
    """The audited shift with admins ``ada`` and ``rita`` and a manager ``max``."""
    db = tmp_path / "shift.duckdb"
    shutil.copy(audited_shift, db)
    s = Store(db)
    for name, role in (("ada", "admin"), ("rita", "admin"), ("max", "manager")):
        auth.add_user(s.con, name, role, f"{name}-long-password", T0)
    yield s
    s.close()


def voiding_finding(store: Store) -> str:
    rows, _ = reviews.find(store.con, FindingFilter(severity="voiding", incident=True), DUE, T0, limit=1)
    return str(rows[0]["finding_id"])


def shift_client(store: Store) -> TestClient:
    last = store.con.execute("SELECT max(observed_at) FROM findings").fetchall()[0][0]
    return TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, clock=Clock(last + timedelta(hours=1)))))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": "Bearer " + token}


def test_four_eyes_refuses_a_twin_of_the_proposer_in_an_old_store(shift: Store) -> None:
    users.put_user(shift.con, "Rita", "manager", auth.hash_password("Rita-long-password"), True, T0, "cli")
    client, fid = shift_client(shift), voiding_finding(shift)
    r = client.post(
        f"/api/v1/findings/{fid}/reviews",
        json={"action": "dispose", "cause": "NOT_A_VIOLATION", **FULL},
        headers=bearer(auth.new_token(shift.con, "rita", T0)),
    )
    assert r.status_code == 201, r.text
    twin = bearer(auth.new_token(shift.con, "Rita", T0))
    r = client.post(f"/api/v1/findings/{fid}/reviews", json={"action": "approve"}, headers=twin)
    assert r.status_code == 403 and "you proposed this disposition" in r.json()["detail"]


# -- 2. four eyes at the level of people --------------------------------------------------------------


def _propose(client: TestClient, store: Store, fid: str) -> None:
    body = {"action": "dispose", "cause": "NOT_A_VIOLATION", **FULL}
    r = client.post(f"/api/v1/findings/{fid}/reviews", json=body, headers=bearer(auth.new_token(store.con, "rita", T0)))
    assert r.status_code == 201 and r.json()["type"] == "FindingDispositionProposed", r.text


def shift_login(client: TestClient, name: str) -> str:
    csrf = csrf_of(client.get("/login").text)
    r = client.post("/login", data={"username": name, "password": f"{name}-long-password", "csrf": csrf, "next": "/"})
    assert r.status_code == 200, r.text
    return csrf_of(r.text)


def test_the_token_trick_an_admin_cannot_mint_a_token_for_another_user_on_the_users_page(shift: Store) -> None:
    client, fid = shift_client(shift), voiding_finding(shift)
    _propose(client, shift, fid)
    csrf = shift_login(client, "rita")
    r = client.post("/admin/users", data={"csrf": csrf, "op": "token", "name": "max"})
    assert r.status_code == 422 and "a token acts only as the user who made it" in r.text
    assert 'id="new-token"' not in r.text and users.tokens_of(shift.con, "max") == []
    assert log_rows(shift, kind="admin_token")[-1]["outcome"] == "refused"
    own = client.post("/admin/users", data={"csrf": csrf, "op": "token", "name": "rita"})
    assert own.status_code == 200 and 'id="new-token"' in own.text  # her own, for herself
    page = client.get("/admin/users").text
    assert page.count('value="token"') == 1  # the New API token button is on her own row only


def test_the_token_trick_a_token_an_admin_made_for_another_user_cannot_approve_403_with_the_reason(
    shift: Store,
) -> None:
    client, fid = shift_client(shift), voiding_finding(shift)
    _propose(client, shift, fid)
    minted = "dt_minted-by-rita-for-max-before-tokens-were-each-users-own"
    users.put_token(shift.con, auth.token_hash(minted), "max", True, T0, by="rita")  # as an older console did
    r = client.post(f"/api/v1/findings/{fid}/reviews", json={"action": "approve"}, headers=bearer(minted))
    assert r.status_code == 403
    assert r.json()["detail"] == (
        "this token of max was issued by rita, who proposed this disposition: "
        "another manager must approve it with their own credential"
    )
    assert client.get(f"/api/v1/findings/{fid}", headers=bearer(minted)).json()["review_status"] == "pending_approval"
    refused = log_rows(shift, kind="review")[-1]
    assert (
        refused["user_name"] == "max" and refused["outcome"] == "refused" and "issued by rita" in str(refused["detail"])
    )


def test_a_token_of_an_older_store_without_its_issuer_is_judged_by_the_access_logs_token_issued_entry(
    shift: Store,
) -> None:
    client, fid = shift_client(shift), voiding_finding(shift)
    _propose(client, shift, fid)
    minted = "dt_minted-by-ada-for-max-in-an-older-store"
    digest = auth.token_hash(minted)
    shift.con.execute(
        "INSERT INTO api_tokens (token_hash, user_name, active, changed_at) VALUES (?, 'max', true, ?)", [digest, T0]
    )
    access_log.append(
        shift.con,
        [
            AccessEntry(
                entry_id="01JD0000000000000000000000",
                at=T0,
                user="ada",
                client="x",
                kind="token_issued",
                outcome="ok",
                detail=f"token {digest[:12]} of max",
            )
        ],
    )
    assert users.token_issuer(shift.con, digest) == "ada"
    r = client.post(f"/api/v1/findings/{fid}/reviews", json={"action": "approve"}, headers=bearer(minted))
    assert r.status_code == 403 and "issued by ada, not by max" in r.json()["detail"]
    ok = client.get("/api/v1/findings?limit=1", headers=bearer(minted))
    assert ok.status_code == 200  # it still reads as max: only the second pair of eyes needs max himself


def test_an_approval_with_a_token_is_recorded_under_its_creator(shift: Store) -> None:
    client, fid = shift_client(shift), voiding_finding(shift)
    _propose(client, shift, fid)
    own = auth.new_token(shift.con, "max", T0)
    assert users.token_issuer(shift.con, auth.token_hash(own)) == "max"
    r = client.post(f"/api/v1/findings/{fid}/reviews", json={"action": "approve"}, headers=bearer(own))
    assert r.status_code == 201 and r.json()["type"] == "FindingApproved" and r.json()["user"] == "max"
    entry = log_rows(shift, kind="review")[-1]
    assert entry["user_name"] == "max"
    assert str(entry["detail"]).endswith(f"by max with token {auth.token_hash(own)[:12]} issued by max")


def test_a_password_reset_ends_the_users_tokens_and_is_logged(store: Store, clock: Clock) -> None:
    tokens = [auth.new_token(store.con, "rita", T0) for _ in range(2)]
    client = app_for(store, clock)
    assert client.get("/api/v1/findings?limit=1", headers=bearer(tokens[0])).status_code == 200
    login(client, "ada")
    r = admin_post(client, op="password", name="rita")
    assert r.status_code == 200  # type: ignore[attr-defined]
    for t in tokens:
        assert client.get("/api/v1/findings?limit=1", headers=bearer(t)).status_code == 401
    detail = "rita; 2 API tokens revoked; one-time password, to be changed at first sign-in"
    assert log_rows(store, kind="password_reset")[-1]["detail"] == detail


def test_users_token_needs_the_users_own_password_and_users_add_of_an_existing_user_revokes_tokens(
    tmp_path: Path,
) -> None:
    db = tmp_path / "users.duckdb"
    run = CliRunner().invoke
    assert (
        run(cli, ["users", "add", "max", "--role", "manager", "--db", str(db)], input="max-long-password\n").exit_code
        == 0
    )
    r = run(cli, ["users", "token", "max", "--db", str(db)], input="an admin's guess\n")
    assert r.exit_code == 1 and "wrong password of max" in r.output and "dt_" not in r.output
    r = run(cli, ["users", "token", "max", "--db", str(db)], input="max-long-password\n")
    assert r.exit_code == 0, r.output
    token = r.output.split()[-1]
    with Store(db) as s:
        assert users.token_user(s.con, auth.token_hash(token)) == {
            "name": "max",
            "role": "manager",
            "issued_by": "max",
        }
        assert [e["outcome"] for e in log_rows(s, kind="token_issued")] == ["refused", "ok"]
    r = run(cli, ["users", "add", "max", "--role", "manager", "--db", str(db)], input="max-new-password\n")
    assert r.exit_code == 0, r.output
    with Store(db) as s:
        assert users.token_user(s.con, auth.token_hash(token)) is None
        detail = "max as manager; 1 API token revoked; one-time password, to be changed at first sign-in"
        assert log_rows(s, kind="password_reset")[-1]["detail"] == detail


# -- 3. the last admin stays, whichever way --------------------------------------------------------------


def test_users_add_on_the_command_line_cannot_demote_the_last_admin(tmp_path: Path) -> None:
    db = tmp_path / "users.duckdb"
    run = CliRunner().invoke
    assert (
        run(cli, ["users", "add", "boss", "--role", "admin", "--db", str(db)], input="boss-long-password\n").exit_code
        == 0
    )
    r = run(cli, ["users", "add", "boss", "--role", "viewer", "--db", str(db)], input="boss-long-password\n")
    assert r.exit_code == 2 and "boss is the last active admin: make another admin first" in r.output, r.output
    with Store(db) as s:
        assert [(u["name"], u["role"], u["active"]) for u in users.users(s.con)] == [("boss", "admin", True)]
    assert (
        run(cli, ["users", "add", "bea", "--role", "admin", "--db", str(db)], input="bea-long-password\n").exit_code
        == 0
    )
    r = run(cli, ["users", "add", "boss", "--role", "viewer", "--db", str(db)], input="boss-long-password\n")
    assert r.exit_code == 0, r.output  # another admin now: boss may step down


def test_twins_of_an_old_store_count_as_one_admin(store: Store) -> None:
    users.put_user(store.con, "ADA", "admin", auth.hash_password("ADA-admin-pass"), True, T0, "cli")
    with pytest.raises(auth.AccessError, match="last active admin"):
        auth.add_user(store.con, "ada", "viewer", "a-long-password", T0)


def test_the_console_cannot_demote_or_deactivate_the_last_admin_through_add_role_or_deactivate(
    store: Store, clock: Clock
) -> None:
    users.put_user(store.con, "bea", "admin", auth.hash_password("bea-admin-pass"), True, T0, "cli")
    client = app_for(store, clock)
    csrf = csrf_of(client.get("/login").text)
    client.post("/login", data={"username": "bea", "password": "bea-admin-pass", "csrf": csrf})
    assert admin_post(client, op="deactivate", name="ada").status_code == 200  # type: ignore[attr-defined]
    users.put_user(store.con, "ada", "admin", None, True, T0 + timedelta(seconds=1), "cli")  # ada back, bea signs out
    users.put_user(store.con, "bea", "viewer", None, True, T0 + timedelta(seconds=1), "cli")
    login(client, "ada")
    for data in (
        {"op": "add", "name": "ada", "role": "viewer"},
        {"op": "role", "name": "ada", "role": "viewer"},
        {"op": "deactivate", "name": "ada"},
    ):
        r = admin_post(client, **data)
        assert r.status_code == 422 and ("yourself" in r.text or "last active admin" in r.text)  # type: ignore[attr-defined]
    assert [u["name"] for u in users.users(store.con) if u["role"] == "admin" and u["active"]] == ["ada"]


def test_the_api_has_no_way_to_change_a_user(store: Store, clock: Clock) -> None:
    """The JSON API changes findings' reviews only: no operation of it adds, changes or removes a
    user, so it cannot remove the last admin (its only state-changing route is the review)."""
    app = create_app(store, ConsoleConfig(DUE, "s" * 48, clock=clock))
    paths = app.openapi()["paths"]
    changing = sorted(
        f"{method.upper()} {path}"
        for path, operations in paths.items()
        for method in operations
        if method not in ("get", "head", "options")
    )
    assert [p for p in paths if not p.startswith("/api/")] == []
    assert changing == ["POST /api/v1/findings/{finding_id}/reviews"]
    token = auth.new_token(store.con, "ada", T0)
    client = app_for(store, clock)
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        r = client.request(method, "/api/v1/users/ada", headers=bearer(token), json={"role": "viewer"})
        assert r.status_code in (404, 405)
    assert users.user(store.con, "ada") is not None and users.user(store.con, "ada")["role"] == "admin"  # type: ignore[index]


def test_a_roster_import_leaves_the_console_users_and_their_admin_alone(tmp_path: Path) -> None:
    """The staff roster (dealers, supervisors) is not the console's users: importing one that
    names the only admin as a dealer changes no user."""
    db = tmp_path / "roster.duckdb"
    run = CliRunner().invoke
    assert (
        run(cli, ["users", "add", "boss", "--role", "admin", "--db", str(db)], input="boss-long-password\n").exit_code
        == 0
    )
    roster = tmp_path / "staff.csv"
    roster.write_text("staff_id,name,role\nboss,Boss Himself,dealer\nadmin,Ad Min,supervisor\n")
    r = run(cli, ["staff", "import", str(roster), "--db", str(db)])
    assert r.exit_code == 0, r.output
    roster.write_text("staff_id,name,role\nboss,Boss Himself,dealer\n")  # boss and admin off the roster
    assert run(cli, ["staff", "import", str(roster), "--db", str(db)]).exit_code == 0
    with Store(db) as s:
        assert [(u["name"], u["role"], u["active"]) for u in users.users(s.con)] == [("boss", "admin", True)]


# -- 4. secrets in their place ---------------------------------------------------------------------------

CREDENTIAL_COLUMNS = {"password_hash", "secret", "session_hash", "token_hash"}


def test_the_replica_holds_no_credential_table_view_column_or_value(shift: Store, tmp_path: Path) -> None:
    """``duckdb`` on the replica: no table or view holds a password hash, a one-time-code secret, a
    session or a token; not even the free blocks of the file hold a password hash."""
    import duckdb

    from projections.store.replica import write_replica

    key = resolve_totp_key(None, None, shift.path)
    access_log.put_totp(shift.con, "max", "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP", T0, key)
    access_log.put_totp(shift.con, "ada", "KRSXG5CTMVRXEZLUKRSXG5CTMVRXEZLU", T0, key)
    shift.con.execute("INSERT INTO console_totp VALUES ('rita', 'CLEARTEXTSECRETOFANOLDSTORE23', true, ?)", [T0])
    auth.new_token(shift.con, "max", T0)
    access_log.start_session(shift.con, "a-session-id", "max", T0)
    replica = tmp_path / "replica" / "copy.duckdb"
    write_replica(shift.con, shift.path, replica)
    con = duckdb.connect(str(replica), read_only=True)
    try:
        relations = con.execute(
            "SELECT table_name, table_type FROM information_schema.tables WHERE table_catalog = current_database()"
        ).fetchall()
        assert ("findings", "BASE TABLE") in relations and ("dim_users", "VIEW") in relations
        names = {str(r[0]) for r in relations}
        assert not names & {"console_sessions", "console_totp", "api_tokens", "dim_api_tokens"}
        strings = []
        for name, _ in relations:
            cols = con.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ?", [name]
            ).fetchall()
            assert not {str(c[0]) for c in cols} & CREDENTIAL_COLUMNS, name
            strings += [(name, str(c[0])) for c in cols if str(c[1]) in ("VARCHAR", "JSON")]
        for name, col in strings:
            found = con.execute(
                f'SELECT count(*) FROM "{name}" WHERE "{col}" LIKE ? OR "{col}" LIKE ? OR "{col}" LIKE ?',
                ["%$argon2%", "%fernet:%", "%CLEARTEXTSECRET%"],
            ).fetchall()[0][0]
            assert found == 0, (name, col)
        assert [r[0] for r in con.execute("SELECT name FROM dim_users ORDER BY name").fetchall()] == [
            "ada",
            "max",
            "rita",
        ]
    finally:
        con.close()
    raw = replica.read_bytes()
    assert b"$argon2id$" not in raw and b"fernet:" not in raw and b"CLEARTEXTSECRET" not in raw
    assert replica.stat().st_mode & 0o777 == 0o600


def test_one_time_code_secrets_are_stored_encrypted_and_open_only_with_their_key(store: Store, clock: Clock) -> None:
    import pyotp
    from cryptography.fernet import Fernet

    app = create_app(store, ConsoleConfig(DUE, "s" * 48, clock=clock))
    key = app.state.console.totp_key
    secret = pyotp.random_base32()
    access_log.put_totp(store.con, "rita", secret, clock.now, key)
    stored = store.con.execute("SELECT secret FROM console_totp WHERE user_name = 'rita'").fetchall()[0][0]
    assert stored.startswith("fernet:") and secret not in stored
    assert access_log.totp_secret(store.con, "rita", key) == secret
    with pytest.raises(access_log.TotpKeyError):
        access_log.totp_secret(store.con, "rita", None)
    with pytest.raises(access_log.TotpKeyError):
        access_log.totp_secret(store.con, "rita", Fernet.generate_key())
    client = TestClient(app)
    csrf = csrf_of(client.get("/login").text)
    data = {"username": "rita", "password": PASSWORDS["rita"], "csrf": csrf, "code": pyotp.TOTP(secret).at(clock.now)}
    assert client.post("/login", data=data, follow_redirects=False).status_code == 303


def test_an_old_stores_clear_secrets_are_encrypted_when_the_console_first_opens_it(store: Store, clock: Clock) -> None:
    import pyotp

    secret = pyotp.random_base32()
    store.con.execute("INSERT INTO console_totp VALUES ('rita', ?, true, ?)", [secret, T0])  # as an older store
    app = create_app(store, ConsoleConfig(DUE, "s" * 48, clock=clock))
    rows = store.con.execute("SELECT secret, changed_at FROM console_totp").fetchall()
    assert len(rows) == 1 and rows[0][0].startswith("fernet:") and rows[0][1] == T0  # same row, same time
    assert access_log.totp_secret(store.con, "rita", app.state.console.totp_key) == secret
    assert log_rows(store, kind="totp_sealed")[-1]["detail"] == "1 one-time-code secrets encrypted at rest"
    create_app(store, ConsoleConfig(DUE, "s" * 48, clock=clock))  # a second start: nothing left to do
    assert len(log_rows(store, kind="totp_sealed")) == 1


def test_the_key_comes_from_the_setting_else_an_owner_only_key_file(tmp_path: Path) -> None:
    from cryptography.fernet import Fernet

    db = tmp_path / "s.duckdb"
    made = resolve_totp_key(None, None, db)
    beside = key_file_beside(db)
    assert beside.exists() and beside.stat().st_mode & 0o777 == 0o600
    assert resolve_totp_key(None, None, db) == made  # the same key at the next start
    given = Fernet.generate_key()
    assert resolve_totp_key(given.decode(), None, db) == given
    named = tmp_path / "keys" / "totp.key"
    named.parent.mkdir()
    named.write_bytes(given)
    named.chmod(0o640)
    with pytest.raises(ValueError, match="readable by others: chmod 600"):
        resolve_totp_key(None, named, db)
    named.chmod(0o600)
    assert resolve_totp_key(None, named, db) == given
    with pytest.raises(ValueError, match="not a Fernet key"):
        resolve_totp_key("not a key", None, db)


def test_serve_refuses_a_key_file_others_can_read_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "s.duckdb"
    Store(db).close()
    key_file = tmp_path / "open.key"
    key_file.write_text("whatever\n")
    key_file.chmod(0o644)
    monkeypatch.setenv("DEALTRAIL_SECURITY__TOTP_KEY_FILE", str(key_file))
    r = CliRunner().invoke(cli, ["serve", "--db", str(db), "--port", "0"])
    assert r.exit_code == 1 and "readable by others" in r.output and "Traceback" not in r.output, r.output


# -- 5. every state-changing request checks its origin -------------------------------------------------------


def test_a_cookie_authenticated_api_post_needs_the_csrf_token_or_this_consoles_origin(shift: Store) -> None:
    client, fid = shift_client(shift), voiding_finding(shift)
    csrf = shift_login(client, "max")
    url, body = f"/api/v1/findings/{fid}/reviews", {"action": "acknowledge"}
    for headers in ({}, {"Origin": "http://evil.example"}, {"Origin": "null"}, {"X-CSRF-Token": "a guess"}):
        r = client.post(url, json=body, headers=headers)
        assert r.status_code == 403, (headers, r.text)
    r = client.post(url, json=body, headers={"Origin": "http://evil.example", "X-CSRF-Token": csrf})
    assert r.status_code == 403 and "another site" in r.json()["detail"]
    assert reviews.history(shift.con, fid) == []
    assert client.post(url, json=body, headers={"X-CSRF-Token": csrf}).status_code == 201
    assert client.post(url, json=body, headers={"Origin": "null", "X-CSRF-Token": csrf}).status_code == 201
    assert client.post(url, json=body, headers={"Origin": "http://testserver"}).status_code == 201
    assert client.get(f"/api/v1/findings/{fid}", headers={"Origin": "http://evil.example"}).status_code == 200  # reads
    bearer_only = TestClient(client.app)  # a bearer token is not sent by a browser on its own: unaffected
    r = bearer_only.post(
        url, json=body, headers={**bearer(auth.new_token(shift.con, "max", T0)), "Origin": "http://evil.example"}
    )
    assert r.status_code == 201


def test_a_form_posted_from_another_site_is_refused_even_with_the_token(store: Store, clock: Clock) -> None:
    client = app_for(store, clock)
    login(client, "ada")
    csrf = csrf_of(client.get("/admin/users").text)
    data = {"csrf": csrf, "op": "add", "name": "eve", "role": "admin"}
    r = client.post("/admin/users", data=data, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and users.user(store.con, "eve") is None
    assert client.post("/admin/users", data=data, headers={"Origin": "http://testserver"}).status_code == 200
