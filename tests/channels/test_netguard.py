"""Outbound safety (DESIGN §3): private, loopback, link-local and metadata addresses are
refused unless allowed, before any connection. End-to-end tests only ever target loopback.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from ipaddress import ip_network

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.test_utils import TestServer

from tidings.channels.failure import outcome_for_exception
from tidings.channels.http import HttpClient, classify
from tidings.channels.netguard import (
    BlockedAddress,
    check_literal_host,
    describe,
    is_allowed,
    parse_networks,
)
from tidings.channels.resolver import GuardedResolver
from tidings.core.errors import ConfigError
from tidings.core.outcome import Delivered, Reason, Reject

LOOPBACK = parse_networks("127.0.0.0/8")

REFUSED = [
    "127.0.0.1",
    "127.255.255.254",
    "::1",
    "::ffff:127.0.0.1",
    "10.0.0.1",
    "172.16.5.4",
    "192.168.1.1",
    "169.254.169.254",
    "fd00:ec2::254",
    "fe80::1",
    "fe80::1%eth0",
    "100.64.0.1",
    "0.0.0.0",
    "::",
    "224.0.0.1",
    "ff02::1",
    "240.0.0.1",
    "255.255.255.255",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "not-an-address",
    "",
]
PUBLIC = ["8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "::ffff:8.8.8.8"]


# Every IPv6 form that embeds an IPv4 address, each with a private and a public one inside:
# (form, address embedding 10.0.0.1 or 127.0.0.1, address embedding 8.8.8.8, public one allowed)
EMBEDDED = [
    ("IPv4-mapped", "::ffff:10.0.0.1", "::ffff:8.8.8.8", True),
    ("NAT64 well-known prefix", "64:ff9b::a00:1", "64:ff9b::808:808", True),
    ("NAT64 well-known prefix, dotted", "64:ff9b::127.0.0.1", "64:ff9b::8.8.8.8", True),
    # RFC 8215's local-use prefix translates inside the operator's own network: never public.
    ("NAT64 local-use prefix", "64:ff9b:1::a00:1", "64:ff9b:1::808:808", False),
    ("6to4", "2002:a00:1::1", "2002:808:808::1", True),
    ("6to4, loopback", "2002:7f00:1::", "2002:808:404::", True),
    # Teredo's client address is stored inverted; 2001::/32 itself is not globally routable.
    (
        "Teredo client",
        "2001:0:808:808:8000:63bf:f5ff:fffe",
        "2001:0:808:808:8000:63bf:f7f7:f7f7",
        False,
    ),
    (
        "Teredo server",
        "2001:0:a00:1:8000:63bf:f7f7:f7f7",
        "2001:0:808:808:8000:63bf:f7f7:f7f7",
        False,
    ),
    # Deprecated forms (RFC 4291 IPv4-compatible, RFC 3879 site-local): never public.
    ("IPv4-compatible", "::a00:1", "::808:808", False),
    ("site-local", "fec0::a00:1", "fec0::808:808", False),
]


@pytest.mark.parametrize(
    ("form", "private", "public", "public_allowed"), EMBEDDED, ids=[e[0] for e in EMBEDDED]
)
def test_embedded_ipv4_forms_are_judged_by_what_they_carry(
    form: str, private: str, public: str, public_allowed: bool
) -> None:
    assert not is_allowed(private), form
    assert is_allowed(public) is public_allowed, form


def test_refusals_name_the_embedded_address() -> None:
    assert describe("2002:7f00:1::") == "6to4 form of 127.0.0.1, a loopback"
    assert describe("64:ff9b::a9fe:a9fe") == "cloud metadata (link-local)"
    assert describe("fec0::1") == "site-local"
    assert describe("64:ff9b:1::808:808") == "local-use NAT64"


@pytest.mark.parametrize("address", REFUSED)
def test_non_public_addresses_are_refused_by_default(address: str) -> None:
    assert not is_allowed(address)
    assert not is_allowed(address, ())


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_allowed(address: str) -> None:
    assert is_allowed(address)


@pytest.mark.parametrize(
    ("address", "allowed", "expected"),
    [
        ("127.0.0.1", "127.0.0.0/8", True),
        ("::ffff:127.0.0.1", "127.0.0.0/8", True),
        ("::1", "127.0.0.0/8", False),
        ("::1", "::1/128", True),
        ("10.0.0.1", "127.0.0.0/8", False),
        ("10.0.0.1", "10.0.0.0/8", True),
        ("10.1.2.3", "10.0.0.0/24", False),
        ("169.254.169.254", "10.0.0.0/8, 127.0.0.0/8", False),
        ("169.254.169.254", "169.254.169.254/32", True),
        ("fd00:ec2::254", "fd00::/8", True),
        ("100.64.0.1", "100.64.0.0/10", True),
        ("8.8.8.8", "127.0.0.0/8", True),
    ],
)
def test_allowed_networks_open_exactly_their_addresses(
    address: str, allowed: str, expected: bool
) -> None:
    assert is_allowed(address, parse_networks(allowed)) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, ()),
        ("", ()),
        (" , ,", ()),
        ("127.0.0.0/8", (ip_network("127.0.0.0/8"),)),
        (" 10.0.0.0/8 ,fd00::/8 ", (ip_network("10.0.0.0/8"), ip_network("fd00::/8"))),
        (["127.0.0.0/8", "::1/128, 10.0.0.1"], ("127.0.0.0/8", "::1/128", "10.0.0.1/32")),
    ],
)
def test_parse_networks(text: str | list[str] | None, expected: tuple[object, ...]) -> None:
    assert parse_networks(text) == tuple(ip_network(str(n)) for n in expected)


@pytest.mark.parametrize(
    ("text", "named", "hint"),
    [
        ("127.0.0.0/8, bogus", "'bogus'", None),
        ("10.0.0.5/8", "'10.0.0.5/8'", "10.0.0.0/8"),
        ("10.0.0.0/33", "'10.0.0.0/33'", None),
    ],
)
def test_parse_networks_names_the_bad_entry(text: str, named: str, hint: str | None) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_networks(text)
    assert named in str(caught.value)
    assert "TIDINGS_ALLOWED_PRIVATE_NETWORKS" in str(caught.value)
    if hint is not None:
        assert f"did you mean {hint}?" in str(caught.value)


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "::1", "::ffff:7f00:1", "[::1]", "10.0.0.1", "169.254.169.254", "fd00:ec2::254"],
)
def test_check_literal_host_refuses_non_public_literals(host: str) -> None:
    with pytest.raises(BlockedAddress) as caught:
        check_literal_host(host, ())
    assert "TIDINGS_ALLOWED_PRIVATE_NETWORKS" in str(caught.value)


@pytest.mark.parametrize("host", ["2130706433", "127.1", "017700000001", "1:2:3"])
def test_check_literal_host_refuses_non_canonical_literals(host: str) -> None:
    # aiohttp treats these as IP literals (never resolved); the OS may read them as 127.0.0.1.
    with pytest.raises(BlockedAddress, match="not a canonical IP address"):
        check_literal_host(host, LOOPBACK)


@pytest.mark.parametrize("host", ["example.com", "localhost", "0x7f.0.0.1", "8.8.8.8"])
def test_check_literal_host_leaves_names_and_public_addresses(host: str) -> None:
    check_literal_host(host, ())  # names go through the GuardedResolver instead


def test_check_literal_host_honours_allowed_networks() -> None:
    check_literal_host("127.0.0.1", LOOPBACK)
    check_literal_host("::ffff:127.0.0.1", LOOPBACK)


def test_refusals_name_the_host_the_address_and_the_setting() -> None:
    error = BlockedAddress("metadata.internal", "169.254.169.254")
    message = str(error)
    assert "'metadata.internal' resolves to 169.254.169.254" in message
    assert "cloud metadata" in message
    assert "TIDINGS_ALLOWED_PRIVATE_NETWORKS" in message
    assert "169.254.169.254/32" in message
    assert (error.host, error.address) == ("metadata.internal", "169.254.169.254")


# --- GuardedResolver over a fixed answer (no DNS, no sockets) --------------------------


class FixedResolver(AbstractResolver):
    def __init__(self, *addresses: str) -> None:
        self.addresses = addresses

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            ResolveResult(
                hostname=host,
                host=a,
                port=port,
                family=socket.AF_INET6 if ":" in a else socket.AF_INET,
                proto=0,
                flags=0,
            )
            for a in self.addresses
        ]

    async def close(self) -> None:
        pass


async def test_resolver_drops_non_public_addresses() -> None:
    inner = FixedResolver("10.0.0.1", "93.184.216.34", "169.254.169.254", "2606:2800::1")
    results = await GuardedResolver((), inner).resolve("rebind.example", 443)
    assert [r["host"] for r in results] == ["93.184.216.34", "2606:2800::1"]


async def test_resolver_refuses_a_name_with_only_blocked_addresses() -> None:
    inner = FixedResolver("169.254.169.254", "10.0.0.1")
    with pytest.raises(BlockedAddress, match=r"'metadata\.example' resolves to 169\.254"):
        await GuardedResolver((), inner).resolve("metadata.example", 80)


async def test_resolver_keeps_allowed_networks() -> None:
    inner = FixedResolver("127.0.0.1", "::1")
    results = await GuardedResolver(LOOPBACK, inner).resolve("localhost", 80)
    assert [r["host"] for r in results] == ["127.0.0.1"]


# --- end to end, loopback only ---------------------------------------------------------


class Canary:
    """A server on 127.0.0.1 that records every request it gets."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append(request.path)
        return web.Response(text="ok")


@pytest.fixture
async def canary() -> AsyncIterator[tuple[Canary, int]]:
    recorder = Canary()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", recorder.handle)
    async with TestServer(app, host="127.0.0.1") as server:
        assert server.port is not None
        yield recorder, server.port


async def post(client: HttpClient, url: str) -> object:
    try:
        response = await client.post(url, body=b"{}", headers={}, timeout_s=5)
    except Exception as error:
        return outcome_for_exception(error)
    return response


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:{port}/", "http://localhost:{port}/", "http://[::ffff:127.0.0.1]:{port}/"],
)
async def test_loopback_targets_are_refused_before_any_request(
    canary: tuple[Canary, int], url: str
) -> None:
    recorder, port = canary
    async with HttpClient() as client:
        with pytest.raises(BlockedAddress):
            await client.post(url.format(port=port), body=b"{}", headers={}, timeout_s=5)
        outcome = await post(client, url.format(port=port))
    assert isinstance(outcome, Reject)
    assert outcome.reason is Reason.BLOCKED_ADDRESS
    assert "TIDINGS_ALLOWED_PRIVATE_NETWORKS" in outcome.error
    assert recorder.seen == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_loopback_is_reachable_when_allowed(canary: tuple[Canary, int], host: str) -> None:
    recorder, port = canary
    async with HttpClient(allowed_networks=LOOPBACK) as client:
        response = await client.post(
            f"http://{host}:{port}/hook", body=b"{}", headers={}, timeout_s=5
        )
    assert response.status == 200
    assert recorder.seen == ["/hook"]


@pytest.mark.parametrize("address", ["10.0.0.1", "169.254.169.254"])
async def test_private_and_metadata_literals_never_reach_aiohttp(address: str) -> None:
    # The pure check refuses first; only because it runs before aiohttp is post called.
    with pytest.raises(BlockedAddress):
        check_literal_host(address, LOOPBACK)
    async with HttpClient(allowed_networks=LOOPBACK) as client:
        outcome = await post(client, f"http://{address}/latest/meta-data/")
    assert isinstance(outcome, Reject)
    assert outcome.reason is Reason.BLOCKED_ADDRESS
    assert address in outcome.error


async def test_a_redirect_to_loopback_is_not_followed(canary: tuple[Canary, int]) -> None:
    recorder, port = canary
    app = web.Application()

    async def bounce(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://127.0.0.1:{port}/internal")

    app.router.add_post("/", bounce)
    async with (
        TestServer(app, host="127.0.0.1") as bouncer,
        HttpClient(allowed_networks=LOOPBACK) as client,
    ):
        response = await client.post(
            f"http://127.0.0.1:{bouncer.port}/", body=b"{}", headers={}, timeout_s=5
        )
    assert response.status == 302
    assert recorder.seen == []


async def test_delivered_through_an_allowed_client(canary: tuple[Canary, int]) -> None:
    _, port = canary
    async with HttpClient(allowed_networks=LOOPBACK) as client:
        response = await client.post(
            f"http://127.0.0.1:{port}/", body=b"{}", headers={}, timeout_s=5
        )
    assert classify(response, datetime.now(UTC)) == Delivered(provider_response="ok")
