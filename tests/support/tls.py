"""A TLS server context for ``localhost`` and the CA file that verifies it (trustme)."""

from __future__ import annotations

import ssl
from pathlib import Path

import trustme


def localhost_tls(directory: Path) -> tuple[ssl.SSLContext, Path]:
    """A server context with a certificate for ``localhost``, and ``directory/ca.pem``,
    the bundle a client verifies it with."""
    authority = trustme.CA()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("localhost").configure_cert(tls)
    bundle = directory / "ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    return tls, bundle
