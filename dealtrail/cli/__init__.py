"""The ``dealtrail`` command line (typer): the app with one module per command group.

Each command is a few lines over one library function: :mod:`.simulate` (simulate, demo),
:mod:`.reports` (audit, reaudit, report, export-schemas), :mod:`.stream` (topics, publish, worker,
project), :mod:`.console` (serve, users), :mod:`.integrity` (verify, digest), :mod:`.replay` and
:mod:`.schedule`, :mod:`.signoff` (sign-report, verify-signoff), :mod:`.keys` (the signing key),
:mod:`.access` (access-log forward), :mod:`.status` (consumer lag), :mod:`.exports` (export,
group report);
:mod:`.common` holds what they share.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

# each command group registers its commands on the app when it is imported
from dealtrail.cli import (  # noqa: F401
    access,
    console,
    control_charts,
    copies,
    evidence,
    exports,
    integrity,
    keys,
    replay,
    reports,
    schedule,
    signoff,
    simulate,
    staff,
    status,
    stream,
)
from dealtrail.cli.common import _DUCKDB_INTERRUPTED, _INTERRUPTED, app, err, store_failure
from dealtrail.cli.stream import publish_report

__all__ = ["app", "main", "publish_report"]


def _interrupted() -> NoReturn:
    err.print(_INTERRUPTED)
    raise SystemExit(130) from None


def main() -> None:
    """Entry point of the ``dealtrail`` console script.

    Sets the process umask to 077 before any command runs, so that files libraries create
    themselves (DuckDB's write-ahead log and spill files) are owner-only from their first byte;
    dealtrail's own writers also set 0600/0700 explicitly, and the store chmods its log after
    each commit, for callers that do not come through here.
    """
    import duckdb

    os.umask(0o077)
    try:
        app()
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
    except (KeyboardInterrupt, duckdb.InterruptException):  # Ctrl-C, in Python or inside a query
        _interrupted()
    except duckdb.Error as exc:  # a store held, damaged or of another version: one line, never a traceback
        raise SystemExit(store_failure(exc)) from None
    except RuntimeError as exc:
        if str(exc) != _DUCKDB_INTERRUPTED:
            raise
        _interrupted()
    except OSError as exc:  # an output path that is a folder, a file where a folder must be, no permission
        err.print(f"[bold red]error:[/] {exc}")
        raise SystemExit(1) from None
