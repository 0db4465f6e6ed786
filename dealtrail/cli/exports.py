"""The command line: the property's daily export (``export``) and the group view (``group report``)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dealtrail.cli.common import _DB, _TZ, _fail, _read_store, _when, _zone_name, app, console, err, load, review_due

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from dealtrail.console.group_view import GroupDirectory
    from dealtrail.reporting.objectstore import Location
    from dealtrail.settings import Settings

group_app = typer.Typer(help="The group view: every property's exports, verified, side by side (read-only).")
app.add_typer(group_app, name="group")


def _location(url: str | None, endpoint: str | None, flag: str, setting: str) -> Location:
    from dealtrail.reporting.objectstore import LocationError, open_location

    if not url:
        raise _fail(f"say where: {flag} or {setting}")
    try:
        return open_location(url, endpoint)
    except LocationError as exc:
        raise _fail(str(exc)) from None


def _signer(settings: Settings) -> Ed25519PrivateKey:
    from projections.records.signing import SigningError, load_key

    try:
        return load_key(settings.signing.key_file)
    except SigningError as exc:
        raise _fail(f"an export is signed with the property's key: {exc}") from None


@app.command("export")
def export(
    to: Annotated[
        str | None, typer.Option(help="A folder or s3://bucket/prefix.", show_default="$DEALTRAIL_EXPORT__TO")
    ] = None,
    day: Annotated[
        list[str] | None,
        typer.Option(help="A gaming day to export (YYYY-MM-DD; again for more): a new revision each time."),
    ] = None,
    db: Annotated[Path | None, typer.Option(help="DuckDB store (opened read-only).", show_default=_DB)] = None,
    tz: Annotated[
        str | None, typer.Option(help="The casino's zone: gaming days are its days.", show_default=_TZ)
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Export the closed days not exported yet, and exit.")] = False,
    now: Annotated[
        str | None, typer.Option(help="Pretend the time is this (ISO 8601).", show_default="the clock")
    ] = None,
    poll: Annotated[float, typer.Option(min=1, help="Seconds between checks for a closed gaming day.")] = 300.0,
) -> None:
    """Export the property's gaming days as signed Parquet (findings with their review state as of
    the export, rounds, figures, dead letters, and a manifest of SHA-256s signed with the
    property's key) to a folder or an S3-compatible bucket, for the group view. Each --day writes a
    new revision beside the earlier ones; without --day every closed gaming day not exported yet,
    once (--once or --now) or as each day closes (like `dealtrail schedule`)."""
    from dealtrail.reporting.exports import ExportError, LocationError, day_period, due_days, export_day

    settings = load()
    property_id = settings.export.property_id
    if property_id is None:
        raise _fail("set DEALTRAIL_EXPORT__PROPERTY_ID: the property's ID in the group's layout")
    location = _location(to or settings.export.to, settings.export.s3_endpoint, "--to", "DEALTRAIL_EXPORT__TO")
    key = _signer(settings)
    zone = _zone_name(tz, settings)
    db = db or settings.db
    fixed = _when(now, "--now")
    try:
        periods = [day_period(d, zone) for d in day or []]
    except ExportError as exc:
        raise _fail(str(exc)) from None

    def run(at: datetime) -> int:
        con = _read_store(db)
        try:
            todo = periods or due_days(con, location, property_id, zone, at)
            for period in todo:
                done = export_day(
                    con,
                    location,
                    property_id,
                    period,
                    zone,
                    key,
                    at,
                    review_due(settings),
                    settings.property_name,
                    settings.archive.dir,
                )
                console.print(
                    f"exported {done.gaming_day} revision {done.revision}: {done.rounds:,} rounds, "
                    f"{done.incidents:,} incidents -> {done.folder}",
                    markup=False,
                )
            return len(todo)
        finally:
            con.close()

    try:
        if periods or once or fixed is not None:
            if run(fixed or datetime.now(UTC)) == 0:
                console.print("no closed gaming day left to export", markup=False)
            return
        console.print(f"exporting each closed gaming day ({zone}) to {location.url} (Ctrl-C to stop)", markup=False)
        while True:
            run(datetime.now(UTC))
            time.sleep(poll)
    except (ExportError, LocationError) as exc:
        raise _fail(str(exc)) from None


@group_app.command("report")
def group_report(
    first: Annotated[str, typer.Option("--from", help="The period's first gaming day (YYYY-MM-DD).")],
    last: Annotated[str, typer.Option("--to", help="The period's last gaming day (YYYY-MM-DD), included.")],
    out: Annotated[Path, typer.Option(help="Folder of the group report's revisions (rev-0001, ...).")],
    source: Annotated[
        str | None,
        typer.Option(help="The exports: a folder or s3://bucket/prefix.", show_default="$DEALTRAIL_GROUP__SOURCE"),
    ] = None,
    keys: Annotated[
        Path | None,
        typer.Option(
            help="Folder of registered public keys, <property_id>.pem.", show_default="$DEALTRAIL_GROUP__KEYS_DIR"
        ),
    ] = None,
    pdf: Annotated[
        bool, typer.Option("--pdf", help="Also print group.pdf with headless Chromium (DEALTRAIL_REPORTS__CHROMIUM).")
    ] = False,
) -> None:
    """Write the group report (HTML, CSV, JSON, Parquet; PDF with --pdf) of every property's exports
    over the gaming days --from to --to: each revision verified (signature with the registered
    key, SHA-256 of every file) before use; a property that fails is shown as failing, never left
    out. Exit 4 when one fails verification; exit 1 when the PDF cannot be printed (the other
    files are written)."""
    from dealtrail.reporting.group import read_group, registered_keys, write_group_report
    from dealtrail.reporting.pdf import PdfError, print_pdf

    settings = load()
    location = _location(
        source or settings.group.source, settings.group.s3_endpoint, "--source", "DEALTRAIL_GROUP__SOURCE"
    )
    keys = keys or settings.group.keys_dir
    if keys is None:
        raise _fail("say where the properties' public keys are: --keys or DEALTRAIL_GROUP__KEYS_DIR")
    try:
        end = (datetime.strptime(last, "%Y-%m-%d") + timedelta(days=1)).strftime("%Y-%m-%d")
        datetime.strptime(first, "%Y-%m-%d")
    except ValueError:
        raise _fail(f"--from and --to are gaming days (YYYY-MM-DD): {first!r}, {last!r}") from None
    if end <= first:
        raise _fail("--to is before --from")
    try:
        registered = registered_keys(keys)
    except OSError as exc:
        raise _fail(f"cannot read --keys {keys}: {exc.strerror}") from None
    now = datetime.now(UTC)
    views = read_group(location, registered, first, end, now)
    control = (settings.control.min_rounds, settings.control.cusum_k, settings.control.cusum_h)
    files = write_group_report(views, out, location.url, first, last, now, control)
    for v in views:
        line = f"{v.property_id}: {'verified' if v.ok else 'FAILED verification'}"
        (console if v.ok else err).print(line + "".join(f"\n  {p}" for p in v.problems), markup=False)
    console.print(f"wrote {files.html}, {files.csv.name}, {files.json.name}", markup=False)
    if pdf:
        try:
            printed = print_pdf(files.html, files.html.with_name("group.pdf"), settings.reports.chromium)
        except PdfError as exc:
            raise _fail(str(exc), 1) from None
        console.print(f"wrote {printed}", markup=False)
    if any(not v.ok for v in views):
        raise typer.Exit(4)


@group_app.command("serve")
def group_serve(
    source: Annotated[
        str | None,
        typer.Option(help="The exports: a folder or s3://bucket/prefix.", show_default="$DEALTRAIL_GROUP__SOURCE"),
    ] = None,
    keys: Annotated[
        Path | None,
        typer.Option(
            help="Folder of registered public keys, <property_id>.pem.", show_default="$DEALTRAIL_GROUP__KEYS_DIR"
        ),
    ] = None,
    users: Annotated[
        Path | None,
        typer.Option(help="The group's users file (JSON, owner-only).", show_default="$DEALTRAIL_GROUP__USERS_FILE"),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8100,
    certfile: Annotated[
        Path | None, typer.Option(help="TLS certificate (PEM): serve https, cookies marked Secure.", exists=True)
    ] = None,
    keyfile: Annotated[Path | None, typer.Option(help="TLS private key (PEM) for --certfile.", exists=True)] = None,
) -> None:
    """Serve the group view: a read-only web view of every property's exports, each revision
    verified as `group report` does (a property that fails is shown failing, with its reasons).
    Directors see every property, a property's manager only hers (the users file). No store is
    opened."""
    import uvicorn

    from dealtrail.cli.console import security_policy, uvicorn_config
    from dealtrail.console.group_view import GroupReader, GroupUsersError, create_group_app, load_group_users
    from dealtrail.console.sessions import new_session_secret

    settings = load()
    location = _location(
        source or settings.group.source, settings.group.s3_endpoint, "--source", "DEALTRAIL_GROUP__SOURCE"
    )
    keys = keys or settings.group.keys_dir
    if keys is None or not keys.is_dir():
        raise _fail("say where the properties' public keys are (a folder): --keys or DEALTRAIL_GROUP__KEYS_DIR")
    users = users or settings.group.users_file
    directory = _group_directory(settings)
    if users is None and directory is None:
        raise _fail(
            "say who may sign in: --users or DEALTRAIL_GROUP__USERS_FILE, or the directory's groups "
            "(DEALTRAIL_GROUP__DIRECTOR_GROUPS, __MANAGER_GROUPS; docs/operating.md)"
        )
    if (certfile is None) != (keyfile is None):
        raise _fail("--certfile and --keyfile go together")
    try:
        accounts = load_group_users(users) if users is not None else {}
    except GroupUsersError as exc:
        raise _fail(str(exc)) from None
    reader = GroupReader(location, keys, timedelta(seconds=settings.group.refresh_seconds), lambda: datetime.now(UTC))
    secret = settings.console.session_secret
    group_view = create_group_app(
        reader,
        accounts,
        secret.get_secret_value() if secret else new_session_secret(),
        security_policy(settings),
        secure_cookies=certfile is not None,
        directory=directory,
        control=(settings.control.min_rounds, settings.control.cusum_k, settings.control.cusum_h),
    )
    scheme = "https" if certfile else "http"
    err.print(
        f"group view: {scheme}://{host}:{port}/ over {location.url} ({len(accounts)} accounts"
        f"{', and the directory' if directory else ''})",
        markup=False,
    )
    server_config = uvicorn_config(
        group_view,
        settings,
        host,
        port,
        ssl_certfile=str(certfile) if certfile else None,
        ssl_keyfile=str(keyfile) if keyfile else None,
    )
    assert isinstance(server_config, uvicorn.Config)
    uvicorn.Server(server_config).run()


def _group_directory(settings: Settings) -> GroupDirectory | None:
    """The directory sign-in of ``group serve``: the console's directory client
    (``DEALTRAIL_DIRECTORY__*``, its callback this view's own ``/auth/callback``) with the group's
    role mapping; None without an issuer or without a mapped group."""
    import dataclasses

    from dealtrail.cli.console import directory_config
    from dealtrail.console.group_view import GroupDirectory
    from dealtrail.console.oidc import Directory

    config = directory_config(settings)
    g = settings.group
    if config is None or not (g.director_groups or g.manager_groups):
        return None
    return GroupDirectory(
        Directory(dataclasses.replace(config, redirect_url=None)),
        frozenset(g.director_groups),
        {p: frozenset(groups) for p, groups in g.manager_groups.items()},
    )


@group_app.command("hash-password")
def group_hash_password() -> None:
    """Print the argon2id hash of a password typed twice (not echoed), for the group's users file."""
    from dealtrail.console.auth import MIN_PASSWORD, hash_password

    password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    if len(password) < MIN_PASSWORD:
        raise _fail(f"a password has at least {MIN_PASSWORD} characters")
    console.print(hash_password(password), markup=False, soft_wrap=True)
