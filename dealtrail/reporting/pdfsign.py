"""A report PDF signed inside the PDF (PAdES baseline, with ``pyhanko``), as ``pdfsig`` and
Acrobat check it.

The signature is made with the property's key, through a certificate it issues itself: Poppler's
``pdfsig`` (NSS, Debian's poppler-utils 22.12) does not validate an Ed25519 signature inside a
PDF (measured: "Document isn't signed or corrupted data" for a PAdES signature pyhanko made with
an Ed25519 key), so the PDF is signed with an ECDSA P-256 key derived from the property's
Ed25519 key (HKDF-SHA256; nothing more to keep), whose X.509 certificate the property's key
signs: subject "<property> report signing", issuer "<property> signing key". ``pdfsig`` then
says "Signature is Valid" and "Certificate issuer is unknown" (self-issued: the regulator
registers the property's public key, not a CA's); any byte appended or changed after signing
makes it say otherwise.

A casino that has its own certificate for signing documents (issued by a CA its regulator or
Acrobat trusts) configures it (``DEALTRAIL_SIGNING__PDF_CERT_FILE`` and
``DEALTRAIL_SIGNING__PDF_KEY_FILE``, :func:`load_identity`): the PDF is then signed with that
certificate and key, its chain embedded, instead of the self-issued certificate.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.x509.oid import NameOID

_P256_ORDER = int("FFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551", 16)


class PdfSignError(ValueError):
    """The PDF cannot be signed (not a PDF pyhanko reads)."""


@dataclass(frozen=True)
class PdfIdentity:
    """A certificate the casino supplies for its PDF signatures, with its key and chain.

    Attributes:
        certificate: the signer's certificate (its subject is the name ``pdfsig`` shows).
        key: its private key (ECDSA or RSA).
        chain: the intermediate certificates after it in the file, embedded in the signature.
    """

    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
    chain: tuple[x509.Certificate, ...] = ()


def load_identity(cert_file: Path, key_file: Path) -> PdfIdentity:
    """The certificate in ``cert_file`` (PEM: the signer's first, then its chain) and its private
    key in ``key_file`` (PEM, unencrypted, owner-only).

    Raises:
        projections.records.signing.SigningError: a file missing or unreadable, the key file
            readable by others, no certificate or no ECDSA/RSA key in them, or a key that is not
            the certificate's.
    """
    from projections.records.signing import SigningError, read_owner_only

    try:
        certs = x509.load_pem_x509_certificates(cert_file.read_bytes())
    except FileNotFoundError:
        raise SigningError(f"no PDF signing certificate at {cert_file}") from None
    except OSError as exc:
        raise SigningError(f"cannot read the PDF signing certificate {cert_file}: {exc.strerror}") from None
    except ValueError:
        raise SigningError(f"{cert_file} holds no PEM certificate") from None
    data = read_owner_only(key_file, "PDF signing key file")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise SigningError(f"{key_file} holds no unencrypted PEM private key") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise SigningError(f"{key_file} holds a {type(key).__name__}: a PDF is signed with an ECDSA or RSA key")
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    if certs[0].public_key().public_bytes(serialization.Encoding.DER, spki) != key.public_key().public_bytes(
        serialization.Encoding.DER, spki
    ):
        raise SigningError(f"the key in {key_file} is not the key of the certificate in {cert_file}")
    return PdfIdentity(certs[0], key, tuple(certs[1:]))


def document_key(property_key: Ed25519PrivateKey) -> ec.EllipticCurvePrivateKey:
    """The P-256 key the property's PDFs are signed with, derived from its Ed25519 key (the
    same key gives the same P-256 key; rotating the property's key rotates it too)."""
    raw = property_key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    seed = HKDF(hashes.SHA256(), 48, salt=b"dealtrail", info=b"report pdf signing key").derive(raw)
    return ec.derive_private_key(int.from_bytes(seed, "big") % (_P256_ORDER - 1) + 1, ec.SECP256R1())


def certificate(property_key: Ed25519PrivateKey, property_name: str, at: datetime) -> x509.Certificate:
    """The certificate of :func:`document_key`, issued by the property's key, valid from a day
    before ``at`` for ten years."""

    def name(cn: str) -> x509.Name:
        return x509.Name(
            [x509.NameAttribute(NameOID.ORGANIZATION_NAME, property_name), x509.NameAttribute(NameOID.COMMON_NAME, cn)]
        )

    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=True,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )
    return (
        x509.CertificateBuilder()
        .subject_name(name(f"{property_name} report signing"))
        .issuer_name(name(f"{property_name} signing key"))
        .public_key(document_key(property_key).public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(at - timedelta(days=1))
        .not_valid_after(at + timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .sign(property_key, None)
    )


def sign_pdf(
    pdf: bytes,
    property_key: Ed25519PrivateKey,
    property_name: str,
    reason: str,
    at: datetime,
    identity: PdfIdentity | None = None,
) -> bytes:
    """``pdf`` signed (PAdES, one signature over the whole document) with the property's key.

    Args:
        pdf: the printed report.
        property_key: the property's signing key (:func:`projections.records.signing.load_key`).
        property_name: the property, named in the certificate.
        reason: the signature's reason (the sign-off's statement, shortened).
        at: when (timezone-aware): the certificate's validity starts the day before.
        identity: the casino's own certificate and key (:func:`load_identity`): the PDF is signed
            with them (their chain embedded) instead of the self-issued certificate; None: the
            certificate the property's key issues.

    Raises:
        PdfSignError: pyhanko cannot read ``pdf``, or ``at`` lies outside ``identity``'s
            certificate's validity.
    """
    from asn1crypto import keys as asn1_keys
    from asn1crypto import x509 as asn1_x509
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
    from pyhanko.pdf_utils.misc import PdfError
    from pyhanko.sign import signers
    from pyhanko.sign.fields import SigSeedSubFilter
    from pyhanko_certvalidator.registry import SimpleCertificateStore

    der = serialization.Encoding.DER
    own: x509.Certificate
    private: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
    chain: tuple[x509.Certificate, ...]
    if identity is None:
        own, private, chain = certificate(property_key, property_name, at), document_key(property_key), ()
    else:
        own, private, chain = identity.certificate, identity.key, identity.chain
        if not own.not_valid_before_utc <= at <= own.not_valid_after_utc:
            raise PdfSignError(
                f"the PDF signing certificate ({own.subject.rfc4514_string()}) is valid from "
                f"{own.not_valid_before_utc.isoformat()} until {own.not_valid_after_utc.isoformat()}, "
                f"not at {at.isoformat()}"
            )
    cert = asn1_x509.Certificate.load(own.public_bytes(der))
    key = asn1_keys.PrivateKeyInfo.load(
        private.private_bytes(der, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    certs = [cert, *(asn1_x509.Certificate.load(c.public_bytes(der)) for c in chain)]
    signer = signers.SimpleSigner(
        signing_cert=cert,
        signing_key=key,
        cert_registry=SimpleCertificateStore.from_certs(certs),  # type: ignore[no-untyped-call]
    )
    meta = signers.PdfSignatureMetadata(
        field_name="Signature1", subfilter=SigSeedSubFilter.PADES, reason=reason[:200], name=property_name
    )
    try:
        out = signers.sign_pdf(IncrementalPdfFileWriter(io.BytesIO(pdf)), meta, signer=signer)
    except (PdfError, ValueError) as exc:
        raise PdfSignError(f"the PDF cannot be signed: {exc}") from None
    return bytes(out.getvalue())


class PdfNotMadeError(Exception):
    """The signed PDF could not be printed or signed (no Chromium, a PDF pyhanko cannot read)."""


def signed_pdf_maker(
    folder: Path,
    key: Ed25519PrivateKey,
    property_name: str,
    chromium: str | None,
    identity: PdfIdentity | None = None,
) -> Callable[[dict[str, Any]], bytes]:
    """What :func:`projections.records.signoff.sign` calls to make ``report-signed.pdf``: the revision's
    report with the sign-off block of the record being written, printed by Chromium and signed
    inside the PDF with the property's key (:func:`dealtrail.reporting.pdfsign.sign_pdf`), or with
    the casino's own certificate ``identity`` when one is configured.

    Raises (when called):
        PdfNotMadeError: Chromium failed or is missing, or the PDF cannot be signed.
    """

    def make(record: dict[str, Any]) -> bytes:
        import tempfile

        from dealtrail.reporting.pdf import PdfError, print_pdf
        from projections.records.signoff import signing_block, with_block

        html = with_block((folder / "report.html").read_text(encoding="utf-8"), signing_block(record))
        with tempfile.TemporaryDirectory(prefix="dealtrail-signed-") as tmp:
            page = Path(tmp) / "report.html"
            page.write_text(html, encoding="utf-8")
            try:
                printed = print_pdf(page, Path(tmp) / "report.pdf", chromium).read_bytes()
            except PdfError as exc:
                raise PdfNotMadeError(str(exc)) from None
        at = datetime.fromisoformat(str(record["signed_at"]))
        try:
            return sign_pdf(printed, key, property_name, f"Signed off: {record['statement']}", at, identity)
        except PdfSignError as exc:
            raise PdfNotMadeError(str(exc)) from None

    return make
