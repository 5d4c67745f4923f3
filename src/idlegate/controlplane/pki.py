"""The local control plane's certificates and keys, made with the ``openssl`` command.

One certificate authority signs everything: the API server's serving certificate (for
127.0.0.1 and the in-cluster names a pod would use), and one client certificate per
caller, whose subject is what RBAC reads (the common name is the user, the organisation
its group). kube-scheduler and kube-controller-manager get their own users, so the
bindings Kubernetes ships for them are what authorises them, as on a real cluster (Kueue's
manager, when one runs beside the plane, is the user ``kueue``, bound to the roles its
module ships: idlegate.controlplane.kueue); the
admin (the user and the tests) and KWOK (a kubelet for every fake node) are in
``system:masters``. The service-account key pair signs and checks the tokens of pods'
service accounts (an operator run under its deployed ServiceAccount, e.g.).

Everything is written once into a folder and reused while it is there: a second ``up``
finds the same certificates, so a kubeconfig copied from the first stays valid.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

from idlegate.errors import IdlegateError

DAYS = 3650
"""A local control plane is thrown away long before its certificates end."""


@dataclasses.dataclass(frozen=True)
class Pki:
    """Where the files are (all PEM)."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def sa_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.directory / "sa.pub"

    def cert(self, name: str) -> Path:
        return self.directory / f"{name}.crt"

    def key(self, name: str) -> Path:
        return self.directory / f"{name}.key"


CLIENTS: dict[str, tuple[str, str | None]] = {
    "admin": ("kubernetes-admin", "system:masters"),
    "kube-scheduler": ("system:kube-scheduler", None),
    "kube-controller-manager": ("system:kube-controller-manager", None),
    "kwok": ("kwok", "system:masters"),
    "kueue": ("kueue", None),
}
"""Each client certificate's file name: (user, group) as RBAC reads them."""

SERVING_NAMES = (
    "DNS:localhost",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
    "IP:127.0.0.1",
    "IP:10.96.0.1",
)
"""The names the API server answers to (loopback, and the service a pod would call)."""


def ensure_pki(directory: Path) -> Pki:
    """The certificates and keys in `directory`, made there first if missing."""
    openssl = _openssl()
    pki = authority(directory, "/CN=idlegate-local-ca")
    if not pki.sa_key.exists():
        _run(openssl, "genrsa", "-out", str(pki.sa_key), "2048")
        _run(openssl, "rsa", "-in", str(pki.sa_key), "-pubout", "-out", str(pki.sa_pub))
    _signed(openssl, pki, "apiserver", "/CN=kube-apiserver", SERVING_NAMES, "serverAuth")
    for name, (user, group) in CLIENTS.items():
        subject = f"/CN={user}" + (f"/O={group}" if group else "")
        _signed(openssl, pki, name, subject, (), "clientAuth")
    return pki


def authority(directory: Path, subject: str, names: tuple[str, ...] = ()) -> Pki:
    """A certificate authority of `subject` (with `names` as its subjectAltName, if any)
    in `directory`, made there first if missing: the plane's, or one a component signs
    with itself (Kueue's webhooks, idlegate.controlplane.kueue)."""
    openssl = _openssl()
    pki = Pki(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if not pki.ca.exists():
        extra = ("-addext", "subjectAltName=" + ",".join(names)) if names else ()
        _run(openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256",
             "-days", str(DAYS), "-subj", subject, *extra,
             "-keyout", str(pki.ca_key), "-out", str(pki.ca))  # fmt: skip
    return pki


def serving(pki: Pki, name: str, names: tuple[str, ...]) -> tuple[Path, Path]:
    """A serving certificate and key for `names` (``DNS:…``, ``IP:…``), signed by the CA:
    what an admission webhook on loopback shows the API server (its caBundle: the CA)."""
    _signed(_openssl(), pki, name, f"/CN={name}", names, "serverAuth")
    return pki.cert(name), pki.key(name)


def pkcs1(key: Path) -> bytes:
    """The RSA key at `key` in PKCS #1 (``BEGIN RSA PRIVATE KEY``), as some readers want
    it (Kueue's certificate rotator, of its CA's key); openssl writes PKCS #8."""
    result = subprocess.run(
        [_openssl(), "rsa", "-in", str(key), "-traditional"],
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        raise IdlegateError(
            f"openssl could not read the key {key}: {result.stderr.decode()[-300:]}"
        )
    return result.stdout


def _openssl() -> str:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise IdlegateError(
            "The local control plane makes its certificates with the openssl command, which "
            "is not installed: install it (Debian: apt-get install openssl) and run again."
        )
    return openssl


def _signed(
    openssl: str, pki: Pki, name: str, subject: str, names: tuple[str, ...], usage: str
) -> None:
    """A key and a certificate for `subject`, signed by the CA, unless already there."""
    if pki.cert(name).exists():
        return
    request = pki.directory / f"{name}.csr"
    extensions = pki.directory / f"{name}.ext"
    lines = ["basicConstraints=CA:FALSE", "keyUsage=digitalSignature,keyEncipherment"]
    lines.append(f"extendedKeyUsage={usage}")
    if names:
        lines.append("subjectAltName=" + ",".join(names))
    extensions.write_text("\n".join(lines) + "\n")
    _run(openssl, "req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
         "-keyout", str(pki.key(name)), "-out", str(request))  # fmt: skip
    _run(openssl, "x509", "-req", "-in", str(request), "-CA", str(pki.ca),
         "-CAkey", str(pki.ca_key), "-CAcreateserial", "-days", str(DAYS), "-sha256",
         "-extfile", str(extensions), "-out", str(pki.cert(name)))  # fmt: skip
    request.unlink()
    extensions.unlink()


def _run(*command: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise IdlegateError(
            f"openssl failed making the local control plane's certificates "
            f"({' '.join(command[1:3])}): {result.stderr.strip()[-500:]}"
        )
