#!/usr/bin/env python3
"""Make the certificate authority and the TLS certificates of a kpca-dask cluster.

Dask's TLS is mutual: the scheduler, the workers and every client present a
certificate signed by the cluster's own CA, and a peer whose certificate does
not chain to that CA is refused. Dask does not check host names (it expects a
dedicated CA per cluster), so one certificate can serve every role; the host
names are still written as subject alternative names for tools that look.

Usage
-----
Make a new CA and one certificate for the scheduler, workers and jobs::

    python deploy/make_certs.py certs/

writes ``certs/ca.crt``, ``certs/ca.key``, ``certs/tls.crt`` and
``certs/tls.key`` -- the key names the ``kpca-dask-tls`` Secret uses. Sign a
further certificate (for a notebook user, say) with the same CA::

    python deploy/make_certs.py certs-alice/ --ca-dir certs/ --common-name alice

Existing files are never overwritten: remove them first.

Examples
--------
>>> import tempfile
>>> from pathlib import Path
>>> out = Path(tempfile.mkdtemp()) / "certs"
>>> main([str(out)])
0
>>> sorted(p.name for p in out.iterdir())
['ca.crt', 'ca.key', 'tls.crt', 'tls.key']
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: Names the scheduler is reached by in the manifests of deploy/ and in local runs.
DEFAULT_HOSTS = (
    "kpca-dask-scheduler",
    "kpca-dask-fit-scheduler",
    "localhost",
    "127.0.0.1",
)
CA_FILES = ("ca.crt", "ca.key")
LEAF_FILES = ("tls.crt", "tls.key")

# Certificates valid from a few minutes ago so that small clock skew between
# the machine that signs and the pods that verify does not matter.
_CLOCK_SKEW = dt.timedelta(minutes=5)


def make_ca(common_name: str = "kpca-dask CA", days: int = 825):
    """Make a self-signed certificate authority that may sign leaf certificates only.

    Parameters
    ----------
    common_name : str, default="kpca-dask CA"
    days : int, default=825
        Validity in days.

    Returns
    -------
    key : EllipticCurvePrivateKey
    certificate : x509.Certificate
    """
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    public = key.public_key()
    start = dt.datetime.now(dt.timezone.utc) - _CLOCK_SKEW
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(signs_certificates=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, certificate


def issue_certificate(ca_key, ca_certificate: x509.Certificate, common_name: str,
                      hosts: Sequence[str] = DEFAULT_HOSTS, days: int = 825):
    """Sign a certificate usable both to serve and to connect (Dask's TLS is mutual).

    Parameters
    ----------
    ca_key : private key of the CA
    ca_certificate : x509.Certificate
    common_name : str
    hosts : sequence of str, default=DEFAULT_HOSTS
        DNS names or IP addresses written as subject alternative names.
    days : int, default=825

    Returns
    -------
    key : EllipticCurvePrivateKey
    certificate : x509.Certificate
    """
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key()
    start = dt.datetime.now(dt.timezone.utc) - _CLOCK_SKEW
    ca_key_id = ca_certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_certificate.subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(signs_certificates=False), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                   ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_key_id.value),
            critical=False)
    )
    if hosts:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_general_name(host) for host in hosts]),
            critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _key_usage(*, signs_certificates: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not signs_certificates,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _write_private_key(path: Path, key) -> None:
    pem = key.private_bytes(serialization.Encoding.PEM,
                            serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    # Created owner-only from the start: the key never exists with looser permissions.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(pem)


def _write_certificate(path: Path, certificate: x509.Certificate) -> None:
    with open(path, "xb") as file:
        file.write(certificate.public_bytes(serialization.Encoding.PEM))


def _load_ca(ca_dir: Path):
    missing = [name for name in CA_FILES if not (ca_dir / name).is_file()]
    if missing:
        raise SystemExit(f"error: {ca_dir} lacks {', '.join(missing)}; pass the directory "
                         "an earlier run of make_certs.py wrote its CA to.")
    key = serialization.load_pem_private_key((ca_dir / "ca.key").read_bytes(), password=None)
    certificate = x509.load_pem_x509_certificate((ca_dir / "ca.crt").read_bytes())
    return key, certificate


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="make_certs.py",
        description="Make the CA and a TLS certificate for a kpca-dask cluster "
                    "(ca.crt, ca.key, tls.crt, tls.key).")
    parser.add_argument("out_dir", type=Path, help="directory to write the PEM files to")
    parser.add_argument("--ca-dir", type=Path, default=None,
                        help="sign with the CA in this directory instead of making a new "
                             "one; ca.crt is copied to OUT_DIR, ca.key is not")
    parser.add_argument("--common-name", default="kpca-dask",
                        help="subject of the certificate (default: kpca-dask)")
    parser.add_argument("--host", dest="hosts", action="append", default=None,
                        metavar="NAME",
                        help="DNS name or IP address of the scheduler; repeat for several "
                             f"(default: {', '.join(DEFAULT_HOSTS)})")
    parser.add_argument("--days", type=int, default=825, help="validity (default: 825)")
    args = parser.parse_args(argv)
    if args.days < 1:
        parser.error(f"--days must be at least 1; got {args.days}.")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    args = _parse_args(argv)
    out_dir: Path = args.out_dir
    to_write = ("ca.crt", *LEAF_FILES) if args.ca_dir else CA_FILES + LEAF_FILES
    existing = [name for name in to_write if (out_dir / name).exists()]
    if existing:
        raise SystemExit(f"error: {out_dir} already holds {', '.join(existing)}; "
                         "remove them or choose another directory.")

    if args.ca_dir is not None:
        ca_key, ca_certificate = _load_ca(args.ca_dir)
    else:
        ca_key, ca_certificate = make_ca(days=args.days)
    key, certificate = issue_certificate(ca_key, ca_certificate, args.common_name,
                                         hosts=args.hosts or DEFAULT_HOSTS, days=args.days)

    out_dir.mkdir(parents=True, exist_ok=True)
    _write_certificate(out_dir / "ca.crt", ca_certificate)
    if args.ca_dir is None:
        _write_private_key(out_dir / "ca.key", ca_key)
    _write_certificate(out_dir / "tls.crt", certificate)
    _write_private_key(out_dir / "tls.key", key)
    written = [name for name in to_write if (out_dir / name).exists()]
    print(f"wrote {', '.join(written)} to {out_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
