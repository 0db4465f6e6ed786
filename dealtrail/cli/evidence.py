"""The command line: evidence packages (``evidence``, ``verify-package``), see :mod:`dealtrail.investigate.evidence`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from dealtrail.cli.common import _DB, _fail, _read_store, app, console, err, load


@app.command()
def evidence(
    finding: Annotated[str, typer.Option("--finding", help="The finding's ID (32 hex characters).")],
    out: Annotated[Path, typer.Option(help="A new folder for the package (with --zip: the zip is OUT.zip).")],
    db: Annotated[Path | None, typer.Option(help="DuckDB store (read-only).", show_default=_DB)] = None,
    zip_: Annotated[bool, typer.Option("--zip", help="Write one zip file instead of a folder.")] = False,
    digest: Annotated[
        Path | None,
        typer.Option(help="A digest saved by dealtrail digest --out to prove the events by.", show_default="head now"),
    ] = None,
) -> None:
    """Write a finding's evidence package for a regulator: the finding, its reviews, its events,
    their hash-chain links to the table's digest, and a README (check it with verify-package)."""
    import getpass
    from datetime import UTC, datetime

    from dealtrail.ingest.verify import load_digest
    from dealtrail.investigate.evidence import EvidenceError, build_package
    from projections.records import property as stored_property
    from projections.records.signing import SigningError, load_key
    from projections.store.private import make_private_dirs, open_private

    settings = load()
    db = db or settings.db
    saved = None
    if digest is not None:
        try:
            saved = load_digest(digest)
        except FileNotFoundError:
            raise _fail(f"--digest {digest}: no such file") from None
        except (OSError, ValueError) as exc:
            raise _fail(f"cannot read digest {digest}: {exc}") from None
    target = out.with_name(out.name + ".zip") if zip_ and out.suffix != ".zip" else out
    if target.exists():
        raise _fail(f"{target} exists: a package is never written over another; choose a new --out")
    con = _read_store(db)
    try:
        key = load_key(settings.signing.key_file) if settings.signing.key_file is not None else None
        package = build_package(
            con,
            finding,
            settings.plausibility,
            datetime.now(UTC),
            saved,
            signer=key,
            property_name=stored_property.resolve(con, settings.property_name),
            made_by=f"{getpass.getuser()} (dealtrail evidence)",
        )
    except (EvidenceError, SigningError) as exc:
        raise _fail(str(exc)) from None
    finally:
        con.close()
    if zip_:
        make_private_dirs(target.parent)
        with open_private(target, binary=True) as fh:
            fh.write(package.zip_bytes(target.stem))
    else:
        try:
            package.write(target)
        except EvidenceError as exc:
            raise _fail(str(exc)) from None
    signed = f"signed by key {package.key_id}" if package.key_id else "NOT signed (no DEALTRAIL_SIGNING__KEY_FILE)"
    console.print(
        f"evidence package of finding {finding} written to {target}: a BagIt bag, {package.events} events, "
        f"{package.links} chain links, {signed} (check it with: dealtrail verify-package {target})"
    )


@app.command("verify-package")
def verify_package(
    package: Annotated[Path, typer.Argument(help="The package's folder or zip.")],
    public_key: Annotated[
        Path | None,
        typer.Option(help="The property's registered public key (PEM): the package must be signed with it."),
    ] = None,
    store: Annotated[
        Path | None,
        typer.Option(
            help="The property's store (read-only): the package must have been made within its key's validity "
            "period recorded there (dealtrail keys show). Only this option opens a store (never DEALTRAIL_DB).",
            show_default="none: the validity is not checked",
        ),
    ] = None,
) -> None:
    """Check an evidence package: its files (exactly the package's, none too large), its signature
    and that it was made within the key's validity period (with a store), every event against its
    hash and chain link, the links up to the digest head, and the finding re-derived by the engine,
    field by field (exit 4 if not); says what it does not prove."""
    from rich.markup import escape

    from dealtrail.investigate.evidence import EvidenceError
    from dealtrail.investigate.evidence import verify_package as check

    keys = _recorded_keys(store)
    try:
        report = check(package, public_key.read_bytes() if public_key is not None else None, keys)
    except OSError as exc:
        raise _fail(f"cannot read --public-key {public_key}: {exc.strerror}") from None
    except EvidenceError as exc:
        raise _fail(escape(str(exc))) from None
    for note in report.notes:
        (err if note.startswith("WARNING") else console).print(note, soft_wrap=True, markup=False)
    if not report.ok:
        err.print(f"[bold red]NOT VERIFIED:[/] {escape(report.problem or '')}", soft_wrap=True)
        if report.event_id:
            err.print(f"first event that does not verify: {report.event_id}", soft_wrap=True)
        raise typer.Exit(4)
    console.print(f"verified: {package}")


def _recorded_keys(store: Path | None) -> list[dict[str, Any]] | None:
    """The signing keys with their validity periods recorded in ``store`` (``--store``); None
    without one. A package is checked without a store unless one is given: the default store
    (``DEALTRAIL_DB``) is never opened, so a console holding it stops no check (issue 47, item 5)."""
    from projections.records import signing_keys

    if store is None:
        return None
    con = _read_store(store)
    try:
        return signing_keys.history(con)
    finally:
        con.close()
