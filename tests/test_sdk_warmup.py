"""model.sdk_warmup: the model client's TLS context, made in a thread as httpx would make it."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from model.sdk_warmup import SdkWarmup


def test_the_context_verifies_certificates_and_host_names() -> None:
    made = SdkWarmup(trust_env=False).tls_context()
    assert isinstance(made, ssl.SSLContext)
    assert made.verify_mode == ssl.CERT_REQUIRED and made.check_hostname
    assert made.cert_store_stats()["x509_ca"] > 0  # the CA bundle is loaded


def test_with_trust_env_it_takes_ssl_cert_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy user's own CA file counts, as it does when httpx makes the context."""
    import certifi

    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(
        Path(certifi.where()).read_bytes().split(b"-----END CERTIFICATE-----")[0]
        + b"-----END CERTIFICATE-----\n"
    )
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    made = SdkWarmup(trust_env=True).tls_context()
    assert isinstance(made, ssl.SSLContext)
    assert made.cert_store_stats()["x509_ca"] == 1
    ignored = SdkWarmup(trust_env=False).tls_context()
    assert isinstance(ignored, ssl.SSLContext)
    assert ignored.cert_store_stats()["x509_ca"] > 1


def test_a_context_that_cannot_be_made_is_left_to_the_http_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "not-a-bundle.pem"
    bad.write_text("not a certificate")
    monkeypatch.setenv("SSL_CERT_FILE", str(bad))
    assert SdkWarmup(trust_env=True).tls_context() is True
