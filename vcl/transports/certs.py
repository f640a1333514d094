"""Keys and certificates for trying the cross-silo transport: a federation CA and one key pair per organization.

    python -m vcl.transports.certs --out keys alice bob carol     # keys/ca.pem, keys/ca.key, keys/<name>.pem, .key

Each certificate names its organization; keys are ECDSA P-256, readable by their owner only. A real federation
signs certificate requests with ``openssl`` or its PKI instead: docs/deployment.md."""

from __future__ import annotations

import argparse
import datetime
import os
import re
import sys
from pathlib import Path

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _write(path: Path, data: bytes, private: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    fd = os.open(path, flags, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def check_pems(ca: str, cert: str, key: str, keys: tuple[str, str, str], organization: str | None = None) -> None:
    """The three TLS files of one side, read before anything listens or dials: ``ca`` and ``cert`` PEM
    certificates, ``cert`` signed by ``ca`` and valid now, ``key`` the private key of ``cert``; ``organization``:
    the name ``cert`` must carry (its one subject alternative name, what the other side checks); ``keys``: their
    settings' names. One sentence naming the setting otherwise (:class:`vcl.errors.VCLInputError`)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    from vcl.errors import VCLInputError

    fix = "give the files python -m vcl.transports.certs made"
    loaded = []
    for path, name in ((ca, keys[0]), (cert, keys[1])):
        data = Path(path).read_bytes()
        try:
            loaded.append(x509.load_pem_x509_certificate(data))
        except ValueError:
            what = "a private key, not a certificate" if b"PRIVATE KEY" in data else "no PEM certificate"
            raise VCLInputError(f"{name}={path} holds {what}; {fix}.") from None
    try:
        private = serialization.load_pem_private_key(Path(key).read_bytes(), password=None)
    except (ValueError, TypeError):
        raise VCLInputError(f"{keys[2]}={key} holds no unencrypted PEM private key; {fix}.") from None
    except Exception:  # an unsupported key type: cryptography's own error classes
        raise VCLInputError(f"{keys[2]}={key} holds no private key vcl can use; {fix}.") from None
    ca_cert, own = loaded
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    if private.public_key().public_bytes(serialization.Encoding.DER, public) != own.public_key().public_bytes(
        serialization.Encoding.DER, public
    ):
        raise VCLInputError(f"{keys[2]}={key} is not the key of the certificate {keys[1]}={cert}; {fix}.")
    now = datetime.datetime.now(datetime.timezone.utc)
    for path, setting, held in ((ca, keys[0], ca_cert), (cert, keys[1], own)):
        if not held.not_valid_before_utc <= now <= held.not_valid_after_utc:
            until = held.not_valid_after_utc.strftime("%Y-%m-%d %H:%M UTC")
            when = f"expired {until}" if now > held.not_valid_after_utc else "is not valid yet"
            raise VCLInputError(f"{setting}={path} {when}; make new ones (python -m vcl.transports.certs).")
    try:
        own.verify_directly_issued_by(ca_cert)
    except Exception:  # ValueError, TypeError or InvalidSignature: not this CA's
        raise VCLInputError(f"{keys[1]}={cert} was not signed by the CA of {keys[0]}={ca}; {fix}.") from None
    if organization is not None:
        try:
            named = own.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            names = named.get_values_for_type(x509.DNSName)
        except x509.ExtensionNotFound:
            names = []
        if names != [organization]:
            raise VCLInputError(
                f"{keys[1]}={cert} names {', '.join(names) or 'no organization'}, not {organization!r}; give this "
                f"organization's own certificate ({organization}.pem of python -m vcl.transports.certs)."
            )


def make(out: Path, names: list[str], days: int = 365, ca_name: str = "vcl federation CA") -> list[Path]:
    """A new CA in ``out`` and a key and certificate for each of ``names``; refuses to overwrite a file."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    for name in names:
        if not NAME.match(name):
            raise ValueError(f"organization name {name!r}: use lower-case letters, digits, '.', '-' and '_'")
    out.mkdir(parents=True, exist_ok=True)
    targets = [out / "ca.pem", out / "ca.key"] + [out / f"{n}.{s}" for n in names for s in ("pem", "key")]
    existing = [str(p) for p in targets if p.exists()]
    if existing:
        raise FileExistsError(f"{', '.join(existing)} exist already; choose another --out")
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)
    ca_key = _key()
    ca_subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_name)])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_subject)
        .issuer_name(ca_subject)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    _write(out / "ca.pem", ca.public_bytes(serialization.Encoding.PEM), private=False)
    _write(out / "ca.key", _pem_key(ca_key), private=True)
    for name in names:
        key = _key()
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.SubjectAlternativeName([x509.DNSName(name)]),
                critical=False,
            )
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        _write(out / f"{name}.pem", cert.public_bytes(serialization.Encoding.PEM), private=False)
        _write(out / f"{name}.key", _pem_key(key), private=True)
    return targets


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m vcl.transports.certs", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("names", nargs="+", help="the organizations (their party names), e.g. alice bob carol")
    p.add_argument("--out", default="keys", help="the folder to write into (new files only)")
    p.add_argument("--days", type=int, default=365, help="how long the certificates last")
    args = p.parse_args(argv)
    try:
        written = make(Path(args.out), args.names, args.days)
    except (ValueError, FileExistsError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("wrote " + " ".join(str(p) for p in written))
    print("give each organization its own <name>.key and <name>.pem and everyone ca.pem; keep ca.key offline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
