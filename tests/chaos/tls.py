"""Certificates for the receiver's TLS port: a private CA the dispatchers are told to trust
(`SSL_CERT_FILE`), a certificate from it for 127.0.0.1, and the two a TLS fault swaps in —
one from no CA the sender trusts, one from the trusted CA for another name."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

#: What a TLS fault presents instead of the good certificate.
BAD_CERTIFICATES = ("untrusted", "wrong_name")


@dataclass(frozen=True)
class TlsFiles:
    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    def chain(self, name: str) -> tuple[Path, Path]:
        """(certificate, key) of `good` or one of BAD_CERTIFICATES."""
        return self.directory / f"{name}.pem", self.directory / f"{name}.key"


def make(directory: Path) -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(directory)
    ca_key, ca_cert = _self_signed("tidings chaos CA", ca=True)
    files.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    loopback = x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
    _write(files, "good", *_issued(ca_key, ca_cert, "127.0.0.1", loopback))
    _write(files, "untrusted", *_self_signed("127.0.0.1", ca=False, san=loopback))
    _write(files, "wrong_name", *_issued(ca_key, ca_cert, "elsewhere", x509.DNSName("elsewhere")))
    return files


def _write(
    files: TlsFiles, name: str, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate
) -> None:
    cert_path, key_path = files.chain(name)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _builder(
    subject: str, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
    )


def _self_signed(
    subject: str, *, ca: bool, san: x509.GeneralName | None = None
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = _builder(subject, name, key).add_extension(
        x509.BasicConstraints(ca=ca, path_length=None), critical=True
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        ).add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    if san is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName([san]), critical=False)
    return key, builder.sign(key, hashes.SHA256())


def _issued(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    subject: str,
    san: x509.GeneralName,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder(subject, ca_cert.subject, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([san]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert
