"""Print a report's HTML to PDF with the system's Chromium in headless print mode.

Why Chromium and not WeasyPrint: the console's browser tests and CI already need Chromium, so
it adds no dependency; it lays out the report exactly as the console's browser shows it
(flexbox, inline SVG charts); and it honours the report's print stylesheet, page margin boxes
included (``@page { @bottom-center { content: "Page " counter(page) " of " counter(pages) } }``,
Chromium 131 and later), so the page numbers and the running header with the property and the
period come from the report itself. WeasyPrint would need pango and its own font setup in every
image. The browser reads the page from a file with a fresh profile; the report is self-contained
(inline styles and SVG, no script) and its Content-Security-Policy forbids scripts and fetches.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
"""Program names looked for on ``PATH`` when ``DEALTRAIL_REPORTS__CHROMIUM`` is unset."""
TIMEOUT_SECONDS = 120.0
"""How long one print may take (a long period's report prints in a few seconds)."""


class PdfError(RuntimeError):
    """No Chromium to print with, or the print failed; the message is one line for the user."""


def find_chromium(configured: str | None = None) -> str:
    """The Chromium program to print with.

    Args:
        configured: ``DEALTRAIL_REPORTS__CHROMIUM`` (a path or a name on ``PATH``); None: the
            first of :data:`CANDIDATES` found on ``PATH``.

    Raises:
        PdfError: none found.
    """
    names = (configured,) if configured else CANDIDATES
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    if configured:
        raise PdfError(f"no Chromium at {configured!r} (DEALTRAIL_REPORTS__CHROMIUM): cannot write the PDF")
    raise PdfError(
        "no Chromium found to print the PDF (looked for " + ", ".join(CANDIDATES) + " on PATH); "
        "install chromium or set DEALTRAIL_REPORTS__CHROMIUM"
    )


def print_pdf(html: Path, pdf: Path, chromium: str | None = None) -> Path:
    """Print the HTML file ``html`` to ``pdf`` (owner-only) with headless Chromium.

    The browser's own header and footer are off: the report's print stylesheet puts the property,
    the period and "Page N of M" on each page.

    Args:
        html: the report's HTML file.
        pdf: where to write the PDF (replaced atomically when it exists).
        chromium: ``DEALTRAIL_REPORTS__CHROMIUM`` (see :func:`find_chromium`).

    Returns:
        ``pdf``.

    Raises:
        PdfError: no Chromium, or it failed or wrote nothing within :data:`TIMEOUT_SECONDS`.
    """
    program = find_chromium(chromium)
    pdf = pdf.absolute()
    tmp = pdf.with_name(f".{pdf.stem}.tmp-{os.getpid()}.pdf")
    with tempfile.TemporaryDirectory(prefix="dealtrail-chromium-") as profile:
        args = [
            program,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",  # runs as an unprivileged user in containers without user namespaces
            "--disable-extensions",
            "--disable-background-networking",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--no-pdf-header-footer",
            f"--print-to-pdf={tmp}",
            html.resolve().as_uri(),
        ]
        try:
            done = subprocess.run(args, capture_output=True, timeout=TIMEOUT_SECONDS, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            tmp.unlink(missing_ok=True)
            raise PdfError(f"Chromium ({program}) could not print {html.name}: {exc}") from None
    if done.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        last = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"])[-1]
        raise PdfError(f"Chromium ({program}) did not print {html.name} (exit {done.returncode}): {last}")
    os.chmod(tmp, 0o600)
    os.replace(tmp, pdf)
    return pdf
