"""The command line: the property's signing key (``dealtrail keys create|show|rotate``).

The private key goes to the file ``DEALTRAIL_SIGNING__KEY_FILE`` names (0600), never to the
store or a log; its public key is recorded in the store with the time from which it is valid
(:mod:`projections.records.signing_keys`), and printed for registration with the regulator.
"""

from __future__ import annotations

import getpass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dealtrail.cli.common import _DB, _fail, _read_store, app, console, load

if TYPE_CHECKING:
    from projections.store.store import Store

keys_app = typer.Typer(help="The property's signing key (Ed25519): packages and sign-offs are signed with it.")
app.add_typer(keys_app, name="keys")

_DB_OPTION = typer.Option(help="DuckDB file (this process writes it).", show_default=_DB)


def _writer(db: Path) -> Store:
    """The store opened for writing, before any key file is touched: a store that is held,
    missing or unreadable ends the command in one ``error:`` line with no key made or moved."""
    from dealtrail.cli.console import _open_writer
    from projections.store.store import Store as Writer

    store = _open_writer(db, load())
    assert isinstance(store, Writer)
    return store


def _record(store: Store, path: Path, at: datetime) -> str:
    """Record the public key of the key in ``path`` in the open ``store``; return its ID."""
    from projections.records import signing_keys
    from projections.records.signing import key_id, load_key, public_pem

    pem = public_pem(load_key(path))
    kid = key_id(pem)
    try:
        signing_keys.record(store.con, kid, pem.decode(), at, getpass.getuser())
    except ValueError as exc:
        raise _fail(str(exc)) from None
    return kid


def _key_file() -> Path:
    path = load().signing.key_file
    if path is None:
        raise _fail("set DEALTRAIL_SIGNING__KEY_FILE to the file the property's private key is kept in")
    return path


@keys_app.command("create")
def keys_create(db: Annotated[Path | None, _DB_OPTION] = None) -> None:
    """Make the property's first signing key: the private key into DEALTRAIL_SIGNING__KEY_FILE
    (0600, never written over), its public key into the store, valid from now."""
    from projections.records.signing import SigningError, create_key

    path = _key_file()
    db = db or load().db
    if path.exists():  # before the store is opened: nothing to do either way
        raise _fail(f"{path} exists: a key file is never written over (dealtrail keys rotate replaces a key)")
    with _writer(db) as store:
        try:
            create_key(path)
        except SigningError as exc:
            raise _fail(f"{exc} (dealtrail keys rotate replaces a key)") from None
        kid = _record(store, path, datetime.now(UTC))
    console.print(f"signing key {kid} created in {path}; its public key is recorded in {db}", markup=False)
    console.print("register it with the regulator: dealtrail keys show", markup=False)


@keys_app.command("rotate")
def keys_rotate(db: Annotated[Path | None, _DB_OPTION] = None) -> None:
    """Replace the signing key: the old private key file is kept beside it as
    KEY_FILE.retired-<key ID> (destroy it when policy says), a new key signs from now on, and
    the old public key stays in the store, valid until now, so earlier signatures still verify."""
    from projections.records.signing import SigningError, create_key, key_id, load_key, public_pem

    path = _key_file()
    db = db or load().db
    try:
        old = key_id(public_pem(load_key(path)))
    except SigningError as exc:
        raise _fail(str(exc)) from None
    retired = path.with_name(f"{path.name}.retired-{old[:16]}")
    if retired.exists():
        raise _fail(f"{retired} exists: a retired key is never written over")
    with _writer(db) as store:  # the key file is moved only once the store can record the new key
        path.rename(retired)
        try:
            create_key(path)
        except SigningError as exc:
            retired.rename(path)
            raise _fail(str(exc)) from None
        kid = _record(store, path, datetime.now(UTC))
    console.print(f"signing key {kid} replaces {old} (kept in {retired}); both are recorded in {db}", markup=False)


@keys_app.command("register")
def keys_register(db: Annotated[Path | None, _DB_OPTION] = None) -> None:
    """Record the public key of a private key made elsewhere (a Docker secret, a key made with
    openssl genpkey -algorithm ed25519) from DEALTRAIL_SIGNING__KEY_FILE, valid from now: the
    key in force before it is valid until now. The key file is only read. A key recorded
    already and in force: nothing to do (exit 0); a retired key is never put back in force."""
    from projections.records import signing_keys
    from projections.records.signing import SigningError, key_id, load_key, public_pem

    path = _key_file()
    db = db or load().db
    try:
        kid = key_id(public_pem(load_key(path)))
    except SigningError as exc:
        raise _fail(str(exc)) from None
    with _writer(db) as store:
        keys = signing_keys.history(store.con)
        if keys and keys[-1]["key_id"] == kid:
            console.print(f"signing key {kid} in {path} is recorded in {db} and in force: nothing to do", markup=False)
            return
        if any(k["key_id"] == kid for k in keys):
            raise _fail(
                f"signing key {kid} in {path} was retired in {db}: a retired key is never put back in force"
                " (make a new key)",
                1,
            )
        kid = _record(store, path, datetime.now(UTC))
    replaced = f"; it replaces {keys[-1]['key_id']} (valid until now)" if keys else ""
    console.print(f"signing key {kid} in {path} is recorded in {db}, valid from now{replaced}", markup=False)
    console.print("register it with the regulator: dealtrail keys show", markup=False)


@keys_app.command("show")
def keys_show(db: Annotated[Path | None, _DB_OPTION] = None) -> None:
    """Print every public key the property has signed with, its ID and validity period, as PEM:
    what the regulator registers and checks signatures with (openssl pkeyutl -verify)."""
    from projections.records import signing_keys

    db = db or load().db
    con = _read_store(db)  # one line for a store missing, held (exit 1) or unreadable
    try:
        keys = signing_keys.history(con)
    finally:
        con.close()
    if not keys:
        raise _fail(f"{db} records no signing key (dealtrail keys create makes one)")
    for key in keys:
        until = key["valid_until"].isoformat() if key["valid_until"] else "now (in force)"
        console.print(f"key {key['key_id']}", markup=False)
        console.print(f"valid from {key['valid_from'].isoformat()} until {until}", markup=False)
        console.print(key["public_key_pem"].rstrip("\n"), markup=False, highlight=False)
