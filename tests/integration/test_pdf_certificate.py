"""A certificate the casino supplies for the PDF signature (issue 35, item 3): with
``DEALTRAIL_SIGNING__PDF_CERT_FILE`` and ``DEALTRAIL_SIGNING__PDF_KEY_FILE`` set, the signed report
PDF (``sign-report --pdf``, the console's Sign button) is signed with that certificate, issued
here by a small CA made with ``cryptography``, and ``pdfsig`` names its subject and says the
signature is valid; a key file others can read, a key that is not the certificate's and a
certificate without its key are refused with one clear line."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from fastapi.testclient import TestClient
from pydantic import ValidationError
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.reporting.pdfsign import PdfSignError, load_identity, sign_pdf
from dealtrail.reporting.schedule import Schedule, run_due
from dealtrail.settings import SigningSettings
from projections.models.reviews import ReviewDue
from projections.records.signing import SigningError, create_key
from projections.store.store import Store

START = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)
NOW = START + timedelta(hours=3)
LABEL = "2026-11-27T1800+0000_UTC"
PASSWORD = "meg-manager-pass"
SUBJECT_CN = "Grand Test Casino Compliance Office"
needs_pdf_tools = pytest.mark.skipif(
    shutil.which("pdfsig") is None or shutil.which("chromium") is None, reason="pdfsig or chromium not installed"
)


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Grand Test Casino"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def _issue(folder: Path) -> Issued:
    """A small CA (its own root) and a document-signing certificate it issues; the certificate
    file holds the certificate and then the CA's (the chain); the key file is owner-only."""
    now = datetime.now(UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("Grand Test Casino Root CA"))
        .issuer_name(_name("Grand Test Casino Root CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(min(now, START) - timedelta(days=30))
        .not_valid_after(now + timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    usage = x509.KeyUsage(True, True, False, False, False, False, False, False, False)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(SUBJECT_CN))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(min(now, START) - timedelta(days=30))
        .not_valid_after(now + timedelta(days=90))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = folder / "pdf-cert.pem", folder / "pdf-key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(serialization.Encoding.PEM))
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    return Issued(cert_file, key_file)


@pytest.fixture
def issued(tmp_path: Path) -> Issued:
    return _issue(tmp_path / "casino-ca")


@pytest.fixture
def db(audited_shift: Path, tmp_path: Path) -> Path:
    path = tmp_path / "s.duckdb"
    shutil.copy(audited_shift, path)
    with Store(path) as s:
        auth.add_user(s.con, "meg", "manager", PASSWORD, datetime(2026, 11, 1, tzinfo=UTC))
    return path


@pytest.fixture
def periods(db: Path, tmp_path: Path) -> Path:
    out = tmp_path / "periods"
    assert len(run_due(db, out, Schedule("0 * * * *"), NOW)) == 2
    return out


def _pdfsig(pdf: Path) -> str:
    r = subprocess.run(["pdfsig", str(pdf)], capture_output=True, text=True, check=False)
    return r.stdout + r.stderr


def _signed_by_the_casinos_certificate(report: str) -> bool:
    return (
        "Signature Validation: Signature is Valid." in report
        and f"Signer Certificate Common Name: {SUBJECT_CN}" in report
        and "report signing" not in report  # not the self-issued certificate
    )


@needs_pdf_tools
def test_sign_report_pdf_is_signed_with_the_casinos_own_certificate_when_configured(
    db: Path, periods: Path, issued: Issued, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    key = tmp_path / "keys" / "property.pem"
    create_key(key)
    env = {
        "DEALTRAIL_SIGNING__KEY_FILE": str(key),
        "DEALTRAIL_SIGNING__PDF_CERT_FILE": str(issued.cert),
        "DEALTRAIL_SIGNING__PDF_KEY_FILE": str(issued.key),
    }
    args = ["sign-report", str(periods / LABEL), "--user", "meg", "--statement", "Reviewed.", "--db", str(db), "--pdf"]
    old = os.umask(0o077)
    try:
        done = CliRunner().invoke(app, args, input=PASSWORD + "\n", env=env)
    finally:
        os.umask(old)
    assert done.exit_code == 0, done.output
    pdf = periods / LABEL / "rev-0001" / "report-signed.pdf"
    said = _pdfsig(pdf)
    assert _signed_by_the_casinos_certificate(said), said
    pdf.write_bytes(pdf.read_bytes() + b"\n")
    assert "Signature is Valid." not in _pdfsig(pdf) or "Total document signed" not in _pdfsig(pdf)


@needs_pdf_tools
def test_the_console_sign_button_signs_the_pdf_with_the_casinos_own_certificate(
    db: Path, periods: Path, issued: Issued, tmp_path: Path
) -> None:
    key = tmp_path / "keys" / "property.pem"
    create_key(key)
    with Store(db) as store:
        config = ConsoleConfig(
            ReviewDue(24, 24, 72),
            "s" * 48,
            reports_dir=periods,
            clock=lambda: NOW + timedelta(minutes=10),
            signing_key=key,
            pdf_certificate=(issued.cert, issued.key),
        )
        client = TestClient(create_app(store, config))

        def csrf(page: str) -> str:
            m = re.search(r'name="csrf" value="([^"]+)"', client.get(page).text)
            assert m
            return m.group(1)

        client.post("/login", data={"username": "meg", "password": PASSWORD, "csrf": csrf("/login"), "next": "/"})
        url = f"/reports/scheduled/{LABEL}/rev-0001/sign"
        done = client.post(url, data={"statement": "Reviewed.", "csrf": csrf("/reports")}, follow_redirects=False)
        assert done.status_code == 303, done.text
    said = _pdfsig(periods / LABEL / "rev-0001" / "report-signed.pdf")
    assert _signed_by_the_casinos_certificate(said), said


def test_a_pdf_key_file_others_can_read_a_key_not_the_certificates_or_half_the_pair_is_refused(
    issued: Issued, tmp_path: Path
) -> None:
    assert load_identity(issued.cert, issued.key).certificate.subject.rfc4514_string().startswith("CN=" + SUBJECT_CN)
    issued.key.chmod(0o640)
    with pytest.raises(SigningError, match="may be read or written by others"):
        load_identity(issued.cert, issued.key)
    other = _issue(tmp_path / "other-ca")
    with pytest.raises(SigningError, match="is not the key of the certificate"):
        load_identity(issued.cert, other.key)
    with pytest.raises(ValidationError, match="set together"):
        SigningSettings(pdf_cert_file=issued.cert)
    issued.key.chmod(0o600)
    identity = load_identity(issued.cert, issued.key)
    late = identity.certificate.not_valid_after_utc + timedelta(days=1)
    with pytest.raises(PdfSignError, match=r"is valid from .* not at"):  # refused before the PDF is read
        sign_pdf(b"%PDF-1.7\n", create_key(tmp_path / "p.pem"), "Grand Test Casino", "Reviewed.", late, identity)


def test_sign_report_refuses_a_pdf_key_file_others_can_read_in_one_line(
    db: Path, periods: Path, issued: Issued, tmp_path: Path
) -> None:
    key = tmp_path / "keys" / "property.pem"
    create_key(key)
    issued.key.chmod(0o644)
    env = {
        "DEALTRAIL_SIGNING__KEY_FILE": str(key),
        "DEALTRAIL_SIGNING__PDF_CERT_FILE": str(issued.cert),
        "DEALTRAIL_SIGNING__PDF_KEY_FILE": str(issued.key),
    }
    args = ["sign-report", str(periods / LABEL), "--user", "meg", "--statement", "Reviewed.", "--db", str(db), "--pdf"]
    r = CliRunner().invoke(app, args, input=PASSWORD + "\n", env=env)
    assert r.exit_code == 1 and "chmod 600" in r.output and "Traceback" not in r.output, r.output
    assert not (periods / LABEL / "rev-0001" / "signoff.json").exists()
