"""catalog.outbound: which addresses an outbound request may reach (the pure core, in
every spelling, checked against the C library's own reading of numeric hosts), and a
request that goes to the address checked, with the name in its Host header and TLS.
Servers here listen on 127.0.0.1 only; no request leaves the machine."""

from __future__ import annotations

import datetime
import socket
import ssl
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from ipaddress import IPv4Address, ip_address, ip_network
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypothesis import given
from hypothesis import strategies as st

from catalog.outbound.addresses import NotAnAddress, host_address, ipv4_spelling, refusal
from catalog.outbound.client import Destination, OutboundRefused, destination_check, post
from tests.approvals.receiver import Receiver
from tests.local_http import http_served

LOOPBACK = [ip_network("127.0.0.0/8")]


@pytest.mark.parametrize(("host", "says"), [
    ("127.0.0.1", "127.0.0.1 is a loopback address"),
    ("127.255.0.9", "127.255.0.9 is a loopback address"),
    ("2130706433", "127.0.0.1 is a loopback address"),  # one decimal number
    ("0177.0.0.1", "127.0.0.1 is a loopback address"),  # octal parts
    ("0x7f.1", "127.0.0.1 is a loopback address"),  # hex, two parts
    ("0x7f000001", "127.0.0.1 is a loopback address"),
    ("127.1", "127.0.0.1 is a loopback address"),
    ("127.0.0.1.", "127.0.0.1 is a loopback address"),  # an absolute name's trailing dot
    ("169.254.169.254", "169.254.169.254 is the cloud metadata address"),
    ("0xa9fea9fe", "169.254.169.254 is the cloud metadata address"),
    ("169.254.1.1", "169.254.1.1 is a link-local address"),
    ("10.0.0.1", "10.0.0.1 is a private address"),
    ("172.31.255.255", "172.31.255.255 is a private address"),
    ("192.168.1.1", "192.168.1.1 is a private address"),
    ("100.100.100.200", "100.100.100.200 is a shared (carrier-grade NAT) address"),  # a cloud's metadata too
    ("0.0.0.0", "0.0.0.0 is an unspecified address"),
    ("0", "0.0.0.0 is an unspecified address"),
    ("224.0.0.1", "224.0.0.1 is a multicast address"),
    ("239.255.255.250", "239.255.255.250 is a multicast address"),
    ("255.255.255.255", "255.255.255.255 is a reserved address"),
    ("240.0.0.1", "240.0.0.1 is a reserved address"),
    ("192.0.2.1", "192.0.2.1 is a documentation address"),
    ("198.18.0.1", "198.18.0.1 is a reserved (benchmarking) address"),
    ("::1", "::1 is a loopback address"),
    ("[::1]", "::1 is a loopback address"),
    ("::", ":: is an unspecified address"),
    ("::ffff:127.0.0.1", "::ffff:7f00:1 is a loopback address (it leads to 127.0.0.1)"),
    ("::ffff:a9fe:a9fe", "::ffff:a9fe:a9fe is the cloud metadata address (it leads to 169.254.169.254)"),
    ("64:ff9b::a9fe:a9fe", "64:ff9b::a9fe:a9fe is the cloud metadata address (it leads to 169.254.169.254)"),
    ("2002:7f00:1::", "2002:7f00:1:: is a loopback address (it leads to 127.0.0.1)"),  # 6to4
    ("::127.0.0.1", "::7f00:1 is a reserved (IPv4-compatible) address"),
    ("fe80::1", "fe80::1 is a link-local address"),
    ("fe80::1%eth0", "fe80::1%eth0 is a link-local address"),
    ("fd00:ec2::254", "fd00:ec2::254 is the cloud metadata address"),
    ("fc00::5", "fc00::5 is a unique-local (private) address"),
    ("fec0::1", "fec0::1 is a site-local (private) address"),
    ("ff02::1", "ff02::1 is a multicast address"),
    ("2001:db8::1", "2001:db8::1 is a documentation address"),
    ("100::1", "100::1 is a reserved (discard) address"),
])
def test_an_address_inside_is_refused_in_every_spelling(host, says):
    address = host_address(host)
    assert address is not None
    assert refusal(address) == says


@pytest.mark.parametrize("host", ["93.184.215.14", "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111",
                                  "::ffff:8.8.8.8", "2002:0808:0808::", "64:ff9b::808:808"])
def test_a_public_address_is_let_through(host):
    address = host_address(host)
    assert address is not None and refusal(address) is None


@pytest.mark.parametrize("host", ["hooks.example.com", "localhost", "1.2.3.4.5", "127.0.0.1x", "0x", "08.1.1.1",
                                  "my-host-10", "10.example"])
def test_a_name_is_no_address_it_is_resolved(host):
    if host == "0x":  # inet_aton reads a bare 0x as 0
        assert ipv4_spelling(host) == IPv4Address(0)
        return
    assert host_address(host) is None


@pytest.mark.parametrize("host", ["256.1.1.1", "1.2.3.256", "1.2.65536", "4294967296", "[::1", "[1::2::3]", "1:2"])
def test_a_host_written_as_an_address_that_is_none_is_refused(host):
    with pytest.raises(NotAnAddress):
        host_address(host)


def test_allowed_networks_let_their_addresses_through_and_nothing_else():
    assert refusal("127.0.0.1", allowed=LOOPBACK) is None
    assert refusal("::ffff:127.0.0.1", allowed=LOOPBACK) is None  # the same host, mapped
    assert refusal("::1", allowed=LOOPBACK) == "::1 is a loopback address"
    assert refusal("10.0.0.1", allowed=LOOPBACK) == "10.0.0.1 is a private address"
    assert refusal("10.0.0.1", allowed=[ip_network("10.0.0.0/8"), ip_network("::1/128")]) is None


def _spell(number: int, parts: int, bases: list[str]) -> str:
    """`number` as inet_aton reads it from `parts` parts, each in its base."""
    sizes = [1] * (parts - 1) + [5 - parts]
    values: list[int] = []
    rest = number
    for size in reversed(sizes):
        values.insert(0, rest % 256 ** size)
        rest //= 256 ** size
    formats = {"dec": "{:d}", "oct": "0{:o}", "hex": "0x{:x}"}
    return ".".join(formats[base].format(value) for base, value in zip(bases, values, strict=False))


@given(number=st.integers(0, 2**32 - 1), parts=st.integers(1, 4),
       bases=st.lists(st.sampled_from(["dec", "oct", "hex"]), min_size=4, max_size=4))
def test_a_numeric_host_is_read_as_the_c_library_reads_it(number, parts, bases):
    spelling = _spell(number, parts, bases)
    expected = IPv4Address(socket.inet_aton(spelling))  # glibc's inet_aton: what getaddrinfo and connect read
    assert expected == IPv4Address(number)
    assert ipv4_spelling(spelling) == expected


# --- the client: resolving, checking, and connecting where it checked (servers on 127.0.0.1:
# integration, as tests/conftest.py's tiers have it) ----------------------------------------------

@pytest.mark.integration
def test_a_name_is_refused_when_it_resolves_inside_and_pinned_when_allowed(settings):
    with pytest.raises(OutboundRefused, match=r"^localhost resolves to 127\.0\.0\.1: 127\.0\.0\.1 is a loopback"):
        destination_check("http://localhost:8199/x")

    settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    pinned = destination_check("http://localhost:8199/x?a=1")
    assert (pinned.host, pinned.port, pinned.target, pinned.address) == (
        "localhost", 8199, "/x?a=1", ip_address("127.0.0.1"))


@pytest.mark.integration
@pytest.mark.parametrize("url", ["ftp://files.example.com/x", "http:///x", "http://a:99999/x", "mailto:a@b.c",
                                 f"http://{'a' * 64}.example/x"])
def test_a_url_that_is_not_http_with_a_host_is_refused(url):
    with pytest.raises(OutboundRefused):
        destination_check(url)


@pytest.mark.integration
def test_the_request_goes_to_the_address_checked_and_never_resolves_the_name_again():
    """rebind.invalid resolves nowhere (RFC 6761): reaching the receiver proves the name
    was not looked up again, and the receiver sees the name it was asked by."""
    with Receiver() as receiver:
        port = receiver.server.server_address[1]
        pinned = Destination("http", "rebind.invalid", port, "/hooks?x=1", ip_address("127.0.0.1"))

        reply = post(pinned, body=b"{}", headers={"Content-Type": "application/json"}, timeout=10, keep=10)

        (received,) = receiver.wait_for(1)
    assert reply.status == 200 and reply.excerpt == b"answer 200"  # no more than asked for
    assert received.headers["host"] == f"rebind.invalid:{port}" and received.path == "/hooks?x=1"


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory) -> tuple[Path, Path]:
    """A self-signed certificate for hooks.test (and its key), made here."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hooks.test")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName([x509.DNSName("hooks.test")]), critical=False)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    folder = tmp_path_factory.mktemp("tls")
    (folder / "cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    return folder / "cert.pem", folder / "key.pem"


@pytest.fixture
def tls_server(tls_files) -> Iterator[tuple[int, list[str]]]:
    """An HTTPS server on 127.0.0.1 with the hooks.test certificate: its port, and the
    server names (SNI) the clients asked for."""
    names: list[str] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*tls_files)

    def note(sock: ssl.SSLObject, name: str, ctx: ssl.SSLContext) -> None:
        names.append(name)

    context.sni_callback = note

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    with http_served(Handler, wrap=lambda sock: context.wrap_socket(sock, server_side=True)) as server:
        yield server.server_address[1], names


@pytest.mark.integration
def test_tls_goes_to_the_address_checked_with_the_name_for_sni_and_the_certificate(tls_files, tls_server):
    port, names = tls_server
    trusting = ssl.create_default_context(cafile=str(tls_files[0]))
    pinned = Destination("https", "hooks.test", port, "/in", ip_address("127.0.0.1"))

    reply = post(pinned, body=b"{}", headers={}, timeout=10, keep=100, tls=trusting)

    assert reply.status == 204 and names == ["hooks.test"]
    elsewhere = Destination("https", "other.test", port, "/in", ip_address("127.0.0.1"))
    with pytest.raises(ssl.SSLCertVerificationError):  # the certificate is checked against the name
        post(elsewhere, body=b"{}", headers={}, timeout=10, keep=100, tls=trusting)
