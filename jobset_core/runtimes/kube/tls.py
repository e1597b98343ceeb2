"""TLS failures with the API server, recognised and explained in one line.

A certificate that does not verify, or a server that does not speak TLS at an https:// address, reaches us
wrapped by urllib3 and mangled by the Kubernetes client; retrying never fixes it. This room finds the SSL error
behind a failure (`tls_failure_of`), says what to change in the kubeconfig (`tls_error`), and wraps a client's
requests so that the failure comes out as a `TlsError` (`with_tls_errors`). It is apart from the retry policy
(`client.py`), which only asks it whether a failure is one of these. Verification turned off on purpose
(`insecure-skip-tls-verify: true`, an Airflow connection's `disable_verify_ssl`) is said once per server, in
one line, instead of urllib3's warning before every request (`quiet_when_unverified`).
"""

from __future__ import annotations

import logging
import ssl
import threading
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from jobset_core.runtimes.kube.api_errors import TlsError, describe_server, one_line

log = logging.getLogger(__name__)


def with_tls_errors(api_client: Any, rest_client: Any) -> None:
    """Make the client's every request raise `TlsError` (one line) when TLS with the server fails.

    The client turns urllib3's SSLError into an ApiException with status 0 and no body, which its own
    `ApiClient.__call_api` then fails to decode (`AttributeError: 'NoneType' object has no attribute
    'decode'`, from under a hundred lines of traceback), and status 0 reads as a transient error besides.
    Its REST client's `request` is wrapped here (once), where the SSLError is still in hand.
    """
    request = rest_client.request
    if getattr(request, "_jobset_tls_errors", False):
        return

    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return request(*args, **kwargs)
        except ApiException as exc:
            if exc.body is None and isinstance(exc.__context__, urllib3.exceptions.SSLError):
                raise tls_or_connection_error(api_client, exc.__context__) from None
            if exc.body is None:  # decoded unconditionally by the client: never None
                exc.body = b""
            raise
        except urllib3.exceptions.MaxRetryError as exc:  # with urllib3's retries on, the SSLError is its reason
            if tls_failure_of(exc) is not None:
                raise tls_error(api_client, exc) from None
            raise

    guarded._jobset_tls_errors = True  # type: ignore[attr-defined]
    rest_client.request = guarded


def tls_or_connection_error(api_client: Any, exc: urllib3.exceptions.SSLError) -> Exception:
    """A TLS failure retrying cannot fix as `TlsError`; any other SSLError (a connection dropped in the
    handshake) as urllib3's own connection error, which ApiRetry retries like any dropped connection."""
    return tls_error(api_client, exc) if tls_failure_of(exc) is not None else exc


# OpenSSL's reasons for bytes that are not TLS at all: what a plain-HTTP server answers to a ClientHello.
NOT_TLS_REASONS = frozenset({"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST",
                             "UNKNOWN_PROTOCOL"})
# X.509 verification codes (OpenSSL's X509_V_ERR_*) -> what a person reads, after OpenSSL's own words.
_SELF_SIGNED = frozenset({18, 19})
_UNKNOWN_CA = frozenset({2, 20, 21})
_IP_ADDRESS_MISMATCH = 64
_HOSTNAME_MISMATCH = 62


def tls_failure_of(exc: BaseException | None) -> ssl.SSLError | None:
    """The SSL error behind a request's failure when it is one retrying cannot fix: the certificate did not
    verify, or what answered is not TLS. Followed through urllib3's wrappers (MaxRetryError's reason, its
    SSLError's argument) and the chain of causes."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ssl.SSLCertVerificationError):
            return exc
        if isinstance(exc, ssl.SSLError):
            return exc if exc.reason in NOT_TLS_REASONS else None
        exc = _inner(exc)
    return None


def _inner(exc: BaseException) -> BaseException | None:
    if isinstance(exc, urllib3.exceptions.MaxRetryError):
        return exc.reason
    if isinstance(exc, urllib3.exceptions.SSLError) and exc.args and isinstance(exc.args[0], BaseException):
        return exc.args[0]
    return exc.__cause__ or exc.__context__


def tls_error(api_client: Any, exc: BaseException) -> TlsError:
    """One line: the server's address, what failed (OpenSSL's reason, in its words), what to change."""
    server = describe_server(api_client)
    failure = tls_failure_of(exc)
    if isinstance(failure, ssl.SSLCertVerificationError):
        return TlsError(
            f"cannot trust the Kubernetes API server at {server}: its certificate did not verify: "
            f"{verification_problem(failure)}; fix the kubeconfig's server (the name or address its certificate "
            "is for) or certificate-authority-data (the CA that signed it), or, for a test cluster only, set "
            "insecure-skip-tls-verify: true"
        )
    reason = one_line(getattr(failure, "reason", None) or failure or exc).lower().replace("_", " ")
    return TlsError(
        f"the Kubernetes API server at {server} does not speak TLS ({reason}): is it https:// to a plain-HTTP "
        "port? fix the kubeconfig's server: http:// for a plain-HTTP server, or the port that serves TLS"
    )


def verification_problem(error: ssl.SSLCertVerificationError) -> str:
    """OpenSSL's words for the failed check, and what they mean for a kubeconfig."""
    said = (error.verify_message or one_line(error)).rstrip(".")
    code = error.verify_code
    if code in _SELF_SIGNED:
        return f"{said}: not signed by a CA the kubeconfig trusts"
    if code in _UNKNOWN_CA:
        return f"unknown CA ({said}): not signed by the kubeconfig's certificate-authority-data"
    if code == _IP_ADDRESS_MISMATCH:
        return f"{said}: it has no IP SAN for that address"
    if code == _HOSTNAME_MISMATCH:
        return f"hostname mismatch ({said})"
    return said


class UnverifiedHTTPSConnectionPool(urllib3.HTTPSConnectionPool):
    """The pool of a client whose configuration turned certificate verification off. urllib3's HTTPS pool warns
    (`InsecureRequestWarning`) before every request on such a connection (`HTTPSConnectionPool._validate_conn`),
    which puts a warning per API call above a command's answer; this pool connects as that one does and says
    nothing, and `quiet_when_unverified` says it once. Only the pools of our clients are of this class: the
    process's other HTTPS requests warn as they always did."""

    def _validate_conn(self, conn: Any) -> None:
        urllib3.HTTPConnectionPool._validate_conn(self, conn)  # what the HTTPS pool adds is the connect and the warning
        if getattr(conn, "is_closed", getattr(conn, "sock", None) is None):
            conn.connect()


# The servers said to be unverified in this process: one line each, however many clients reach them.
_said_unverified: set[str] = set()
_said_lock = threading.Lock()


def quiet_when_unverified(api_client: Any, rest_client: Any) -> None:
    """For a client that does not verify the server's certificate: its pools no longer warn before each request,
    and one line (a warning on this module's logger, once per server and process) says that verification is
    off for that server and what that means."""
    configuration = getattr(api_client, "configuration", None)
    pool = getattr(rest_client, "pool_manager", None)
    host = str(getattr(configuration, "host", "") or "")
    if pool is None or getattr(configuration, "verify_ssl", True) or not host.startswith("https://"):
        return
    if pool.pool_classes_by_scheme.get("https") is not UnverifiedHTTPSConnectionPool:
        pool.pool_classes_by_scheme = {**pool.pool_classes_by_scheme, "https": UnverifiedHTTPSConnectionPool}
        pool.clear()
    with _said_lock:
        if host in _said_unverified:
            return
        _said_unverified.add(host)
    log.warning(
        "TLS certificate verification is off for the Kubernetes API server at %s: anyone on the way can read and "
        "change what is sent, the credentials included; for a test cluster only", describe_server(api_client),
    )
