"""A throw-away CA and the certificates the e2e control plane needs (openssl(1), Debian's).

One CA signs: the API server's serving certificate, the admin client certificate (group
``system:masters``, what envtest's admin user gets), and the katib-controller webhook server's
certificate (SAN 127.0.0.1, the ``url`` clientConfig of Katib's webhooks). The API server's
service-account key pair is an RSA key of its own.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@dataclass(frozen=True)
class Pki:
    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.crt"

    def cert(self, name: str) -> Path:
        return self.dir / f"{name}.crt"

    def key(self, name: str) -> Path:
        return self.dir / f"{name}.key"

    @classmethod
    def create(cls, directory: Path, *, apiserver_sans: str = "IP:127.0.0.1,DNS:localhost") -> Pki:
        directory.mkdir(parents=True, exist_ok=True)
        pki = cls(directory)
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=e2e-ca",
                 "-keyout", "ca.key", "-out", "ca.crt", cwd=directory)  # fmt: skip
        pki.issue("apiserver", "/CN=kube-apiserver", apiserver_sans)
        pki.issue("admin", "/O=system:masters/CN=e2e-admin", None)
        pki.issue("webhook", "/CN=katib-controller", "IP:127.0.0.1,DNS:localhost")
        _openssl("genrsa", "-out", "sa.key", "2048", cwd=directory)
        _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=directory)
        return pki

    def issue(self, name: str, subject: str, san: str | None) -> None:
        d = self.dir
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", cwd=d)  # fmt: skip
        ext = d / f"{name}.ext"
        lines = ["basicConstraints=CA:FALSE", "keyUsage=digitalSignature,keyEncipherment"]
        lines.append(f"subjectAltName={san}" if san else "extendedKeyUsage=clientAuth")
        if san:
            lines.append("extendedKeyUsage=serverAuth,clientAuth")
        ext.write_text("\n".join(lines) + "\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-extfile", ext.name,
                 "-out", f"{name}.crt", cwd=d)  # fmt: skip
