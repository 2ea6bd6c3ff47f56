"""The API server's serving certificate: self-signed for loopback, made at start, trusted through the
kubeconfig's `certificate-authority-data`. Real API servers serve only HTTPS, and kubectl sends its
credentials only over HTTPS (client-go drops them for an `http://` server)."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class ServingCert:
    cert_pem: str  # also the CA: it signs itself
    key_pem: str

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        # load_cert_chain reads files only; the key never needs to outlive this call.
        with tempfile.TemporaryDirectory() as folder:
            cert, key = Path(folder) / "tls.crt", Path(folder) / "tls.key"
            cert.write_text(self.cert_pem)
            key.write_text(self.key_pem)
            context.load_cert_chain(cert, key)
        return context

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=self.cert_pem)


def _san(host: str) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        names.append(x509.DNSName(host))
    else:
        if str(address) != "127.0.0.1":
            names.append(x509.IPAddress(address))
    return x509.SubjectAlternativeName(names)


def self_signed(host: str = "127.0.0.1", days: int = 30) -> ServingCert:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "simcluster-apiserver")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(_san(host), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return ServingCert(cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem)
