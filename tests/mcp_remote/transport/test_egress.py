"""The egress policy: which addresses a chat's remote MCP servers may be, checked on resolved addresses.

The policy tests are pure (no network). The connection tests run real servers on 127.0.0.1
only; every other address comes from a resolver injected at our own seam, and the tests that
use a public address replace the socket connect too, so no test sends a packet off loopback.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import httpcore2
import httpx2
import pytest
from anyio.abc import TaskGroup
from mcp.server.mcpserver import MCPServer

from playa.exceptions import ConfigError, ConnectFailed
from playa.mcp_remote import EgressPolicy, HostSecret, RemoteMcpSettings
from playa.mcp_remote.transport import (
    ConnectionSettings,
    Connector,
    EgressRefused,
    Endpoint,
    GuardedBackend,
    guarded_transport,
)
from servers.python_servers import LOOPBACK, RunningServer, blackhole, serve_mcp
from support.chat import ScriptedUI, msg
from support.host import remote_host

pytestmark = pytest.mark.anyio

PUBLIC = EgressPolicy(mode="public")
ONLY_PUBLIC = "this host only connects to public addresses"
# A public address for tests whose connect is faked: nothing is ever sent to it.
SOME_PUBLIC_IP = "93.184.215.14"

Transport = Literal["streamable-http", "sse"]


# --- The policy, pure -------------------------------------------------------------------------

REFUSED_URLS = [
    pytest.param("http://127.0.0.1/mcp", "loopback", id="loopback"),
    pytest.param("http://[::1]/mcp", "loopback", id="ipv6-loopback"),
    pytest.param("http://10.0.0.5/mcp", "private", id="rfc1918-10"),
    pytest.param("http://172.16.3.4/mcp", "private", id="rfc1918-172"),
    pytest.param("http://192.168.1.1/mcp", "private", id="rfc1918-192"),
    pytest.param("http://[fd12:3456::1]/mcp", "private", id="ula"),
    pytest.param("http://169.254.1.1/mcp", "link-local", id="link-local-v4"),
    pytest.param("http://[fe80::1]/mcp", "link-local", id="link-local-v6"),
    pytest.param("http://[fe80::1%25eth0]/mcp", "link-local", id="link-local-v6-zone"),
    pytest.param("http://100.64.0.1/mcp", "CGNAT", id="cgnat"),
    pytest.param("http://224.0.0.1/mcp", "multicast", id="multicast-v4"),
    pytest.param("http://[ff02::1]/mcp", "multicast", id="multicast-v6"),
    pytest.param("http://0.0.0.0/mcp", "unspecified", id="unspecified-v4"),
    pytest.param("http://[::]/mcp", "unspecified", id="unspecified-v6"),
    pytest.param("http://255.255.255.255/mcp", "broadcast", id="broadcast"),
    pytest.param("http://240.0.0.1/mcp", "reserved", id="reserved-class-e"),
    pytest.param("http://198.18.0.1/mcp", "benchmarking", id="benchmarking"),
    pytest.param("http://192.0.2.10/mcp", "documentation", id="documentation-v4"),
    pytest.param("http://[2001:db8::1]/mcp", "documentation", id="documentation-v6"),
    pytest.param("http://169.254.169.254/latest/meta-data/", "metadata", id="metadata-aws-gcp-azure"),
    pytest.param("http://[fd00:ec2::254]/", "metadata", id="metadata-aws-ipv6"),
    pytest.param("http://100.100.100.200/", "metadata", id="metadata-alibaba"),
    pytest.param("http://168.63.129.16/", "metadata", id="metadata-azure-wireserver"),
    pytest.param("http://169.254.170.2/v2/credentials", "metadata", id="metadata-aws-ecs"),
    pytest.param("http://2130706433/mcp", "127.0.0.1", id="decimal-ipv4"),
    pytest.param("http://0177.0.0.1/mcp", "127.0.0.1", id="octal-ipv4"),
    pytest.param("http://0x7f.1/mcp", "127.0.0.1", id="hex-ipv4"),
    pytest.param("http://0x7f000001/mcp", "127.0.0.1", id="hex-ipv4-single"),
    pytest.param("http://127.1/mcp", "127.0.0.1", id="short-ipv4"),
    pytest.param("http://0251.0376.0251.0376/", "169.254.169.254", id="octal-metadata"),
    pytest.param("http://[::ffff:127.0.0.1]/mcp", "IPv4-mapped form of 127.0.0.1", id="ipv4-mapped"),
    pytest.param("http://[::ffff:a9fe:a9fe]/", "169.254.169.254", id="ipv4-mapped-hex-metadata"),
    pytest.param("http://[::127.0.0.1]/mcp", "IPv4-compatible form of 127.0.0.1", id="ipv4-compatible"),
    pytest.param("http://[2002:a00:5::1]/mcp", "6to4 form of 10.0.0.5", id="6to4-private"),
    pytest.param("http://[2002:7f00:1::1]/mcp", "6to4 form of 127.0.0.1", id="6to4-loopback"),
    pytest.param("http://[64:ff9b::a00:5]/mcp", "NAT64 form of 10.0.0.5", id="nat64-private"),
    pytest.param("http://[64:ff9b::a9fe:a9fe]/", "NAT64 form of 169.254.169.254", id="nat64-metadata"),
    # Teredo: the client address 10.0.0.1 is stored XOR-ed with all ones (f5ff:fffe).
    pytest.param("http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/", "Teredo form of 10.0.0.1", id="teredo"),
    pytest.param("http://localhost/mcp", "local name", id="localhost"),
    pytest.param("http://LOCALHOST/mcp", "local name", id="localhost-upper-case"),
    pytest.param("http://localhost./mcp", "local name", id="localhost-trailing-dot"),
    pytest.param("http://api.localhost/mcp", "local name", id="dot-localhost"),
    pytest.param("http://printer.local/mcp", "local name", id="dot-local"),
    pytest.param("http://metadata.google.internal/", "local name", id="dot-internal"),
    pytest.param("http://db.internal./mcp", "local name", id="dot-internal-trailing-dot"),
    pytest.param("http://intranet/mcp", "single-label", id="single-label"),
    pytest.param("http://good@127.0.0.1/mcp", "loopback", id="userinfo-before-loopback"),
    pytest.param("http://user:pw@10.1.2.3/mcp", "private", id="userinfo-before-private"),
]


@pytest.mark.parametrize(("url", "why"), REFUSED_URLS)
def test_the_public_policy_refuses_a_url_that_is_not_public(url: str, why: str) -> None:
    reason = PUBLIC.url_refusal(url)
    assert reason is not None
    assert why in reason


@pytest.mark.parametrize(
    "url",
    [
        "https://mcp.example.com/mcp",
        "https://MCP.Example.COM./mcp",
        "http://8.8.8.8/mcp",
        "http://[2606:4700:4700::1111]/mcp",
        "http://[::ffff:8.8.8.8]/mcp",
        "http://[64:ff9b::808:808]/mcp",
        "http://[2002:808:808::1]/mcp",
        "http://134744072/mcp",
    ],
)
def test_the_public_policy_lets_a_public_url_through(url: str) -> None:
    assert PUBLIC.url_refusal(url) is None


def test_a_refusal_names_the_address_what_it_is_and_the_rule() -> None:
    assert PUBLIC.url_refusal("http://10.0.0.5/mcp") == f"address 10.0.0.5 is private; {ONLY_PUBLIC}"
    assert PUBLIC.url_refusal("http://0x7f.1/") == f"address 0x7f.1 (127.0.0.1) is loopback; {ONLY_PUBLIC}"


@pytest.mark.parametrize("url", [row.values[0] for row in REFUSED_URLS])
def test_the_any_policy_refuses_no_address(url: str) -> None:
    assert EgressPolicy(mode="any").url_refusal(url) is None


def test_userinfo_is_judged_by_the_host_after_it() -> None:
    # The store seals userinfo as a credential and shows it masked; the policy judges the host.
    assert PUBLIC.url_refusal("https://user:pass12345@example.com/mcp") is None
    assert EgressPolicy(mode="any").url_refusal("http://u:p@127.0.0.1/") is None


def test_the_operators_allow_list_lets_hosts_and_networks_through() -> None:
    policy = EgressPolicy(
        mode="public", allow=("127.0.0.1/32", "localhost", "*.corp.internal", "10.1.0.0/16")
    )
    assert policy.url_refusal("http://127.0.0.1:8000/mcp") is None
    assert policy.url_refusal("http://localhost:8000/mcp") is None
    assert policy.url_refusal("http://localhost.:8000/mcp") is None
    assert policy.url_refusal("http://mcp.corp.internal/mcp") is None
    assert policy.url_refusal("http://10.1.2.3/mcp") is None
    # Only what is listed.
    assert policy.url_refusal("http://127.0.0.2/mcp") is not None
    assert policy.url_refusal("http://corp.internal/mcp") is not None
    assert policy.url_refusal("http://10.2.0.1/mcp") is not None
    assert policy.url_refusal("http://other.internal/mcp") is not None


def test_an_allowed_name_trusts_what_it_resolves_to_and_an_allowed_network_only_itself() -> None:
    policy = EgressPolicy(mode="public", allow=("mcp.corp.example", "10.1.0.0/16"))
    private = [ipaddress.ip_address("10.9.9.9")]
    assert policy.resolved_refusal("mcp.corp.example", private) is None
    assert policy.resolved_refusal("other.example", [ipaddress.ip_address("10.1.0.7")]) is None
    assert "10.9.9.9" in (policy.resolved_refusal("other.example", private) or "")


def test_configuration_text_is_parsed_with_a_default_and_clear_errors() -> None:
    assert EgressPolicy.parse(None, None, default="public") == EgressPolicy(mode="public")
    assert EgressPolicy.parse("", "", default="any").mode == "any"
    parsed = EgressPolicy.parse(" Public ", "localhost, 127.0.0.1/32 ,", default="any")
    assert parsed == EgressPolicy(mode="public", allow=("localhost", "127.0.0.1/32"))
    with pytest.raises(ConfigError, match="'public' or 'any'"):
        EgressPolicy.parse("private", None, default="any")
    with pytest.raises(ConfigError, match=r"10\.0\.0\.0/33' is neither"):
        EgressPolicy.parse("public", "10.0.0.0/33", default="any")
    with pytest.raises(ConfigError, match="neither a host name"):
        EgressPolicy.parse("public", "http://example.com/", default="any")


def test_settings_carry_the_policy_and_default_to_any() -> None:
    # The library default stays "any": the front end chooses (Telegram: public, console: any).
    assert ConnectionSettings().egress.mode == "any"
    assert ConnectionSettings(egress=PUBLIC).egress is PUBLIC


# --- The backend: resolve once, check every address, connect to a checked one --------------------


class Recorder(httpcore2.AsyncNetworkBackend):
    """A fake DNS and socket connect: answers from a script, records what was asked and connected."""

    def __init__(self, *answers: Sequence[str] | OSError) -> None:
        self.answers = list(answers)
        self.resolved: list[str] = []
        self.connected: list[str] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.resolved.append(host)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, OSError):
            raise answer
        return list(answer)

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        self.connected.append(host)
        return TlsRecorder()


class TlsRecorder(httpcore2.AsyncNetworkStream):
    """A stream that records the host name TLS was asked to verify, then fails the handshake."""

    server_hostname: str | None = None

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.AsyncNetworkStream:
        TlsRecorder.server_hostname = server_hostname
        raise httpcore2.ConnectError("stopped by the test")

    async def aclose(self) -> None:
        pass


async def test_dns_rebinding_cannot_move_a_checked_connection_to_a_private_address() -> None:
    fake = Recorder([SOME_PUBLIC_IP], ["10.0.0.5"])
    backend = GuardedBackend(PUBLIC, resolve=fake.resolve, network_backend=fake)
    with anyio.fail_after(5):
        await backend.connect_tcp("mcp.example.com", 443)
        # The second resolution answers privately: that connection is refused before any connect.
        with pytest.raises(EgressRefused, match=r"resolves to 10\.0\.0\.5, which is private"):
            await backend.connect_tcp("mcp.example.com", 443)
    # One resolution per connection, and the socket went to the address that was checked.
    assert fake.resolved == ["mcp.example.com", "mcp.example.com"]
    assert fake.connected == [SOME_PUBLIC_IP]


async def test_a_name_resolving_to_both_public_and_private_addresses_is_refused_before_any_connect() -> None:
    fake = Recorder([SOME_PUBLIC_IP, "127.0.0.1"])
    backend = GuardedBackend(PUBLIC, resolve=fake.resolve, network_backend=fake)
    with anyio.fail_after(5), pytest.raises(EgressRefused) as refused:
        await backend.connect_tcp("mixed.example.com", 443)
    assert (
        refused.value.reason == f"mixed.example.com resolves to 127.0.0.1, which is loopback; {ONLY_PUBLIC}"
    )
    assert fake.connected == []


async def test_a_name_that_does_not_resolve_is_refused_with_a_clear_reason() -> None:
    import socket

    fake = Recorder(socket.gaierror(socket.EAI_NONAME, "Name or service not known"))
    backend = GuardedBackend(PUBLIC, resolve=fake.resolve, network_backend=fake)
    with (
        anyio.fail_after(5),
        pytest.raises(EgressRefused, match=r"host not found: nowhere\.example does not resolve"),
    ):
        await backend.connect_tcp("nowhere.example", 443)
    assert fake.connected == []


async def test_an_empty_or_malformed_dns_answer_is_refused() -> None:
    for answer in ([], ["not-an-address"]):
        fake = Recorder(answer)
        backend = GuardedBackend(PUBLIC, resolve=fake.resolve, network_backend=fake)
        with anyio.fail_after(5), pytest.raises(EgressRefused, match="host not found"):
            await backend.connect_tcp("odd.example.com", 443)
        assert fake.connected == []


async def test_a_disguised_literal_is_checked_and_connected_as_the_address_it_spells() -> None:
    fake = Recorder([SOME_PUBLIC_IP])
    allowing = EgressPolicy(mode="public", allow=("127.0.0.1/32",))
    backend = GuardedBackend(allowing, resolve=fake.resolve, network_backend=fake)
    with anyio.fail_after(5):
        await backend.connect_tcp("0x7f.1", 80)
        with pytest.raises(EgressRefused, match=r"0x7f\.2 \(127\.0\.0\.2\) is loopback"):
            await backend.connect_tcp("0x7f.2", 80)
    assert fake.resolved == []
    assert fake.connected == ["127.0.0.1"]


async def test_tls_verifies_the_url_host_name_while_the_socket_goes_to_the_checked_address() -> None:
    fake = Recorder([SOME_PUBLIC_IP])
    transport = guarded_transport(
        PUBLIC, ssl_context=ssl.create_default_context(), resolve=fake.resolve, network_backend=fake
    )
    async with httpx2.AsyncClient(transport=transport) as client:
        with anyio.fail_after(5), pytest.raises(httpx2.ConnectError):
            await client.get("https://mcp.example.com/mcp")
    assert fake.connected == [SOME_PUBLIC_IP]
    assert TlsRecorder.server_hostname == "mcp.example.com"


# --- The connection layer, against real servers on loopback -----------------------------------


def make_server() -> MCPServer:
    server = MCPServer("egress")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    return server


def resolver(mapping: dict[str, list[str]]) -> Any:
    async def resolve(host: str, port: int) -> list[str]:
        if host not in mapping:
            raise OSError(f"no test answer for {host}")
        return mapping[host]

    return resolve


def settings(policy: EgressPolicy) -> ConnectionSettings:
    return ConnectionSettings(connect_timeout=15.0, call_timeout=15.0, close_timeout=5.0, egress=policy)


async def echoed(connector: Connector, target: Endpoint, task_group: TaskGroup, text: str) -> str:
    """What the server's ``echo`` tool answers ``text`` over a connection of ``connector``'s, then closed."""
    connection = await connector.connect(target, task_group)
    try:
        result = await connection.call_tool("echo", {"text": text})
        return str(result.content[0].model_dump()["text"])
    finally:
        await connection.aclose()


def on_host(url: str, host: str) -> str:
    return url.replace(LOOPBACK, host, 1)


TRANSPORTS = pytest.mark.parametrize("transport", ["streamable-http", "sse"])


@dataclass
class Local:
    """The echo server on loopback, over ``transport``."""

    served: RunningServer
    transport: Transport

    def endpoint(self, host: str = LOOPBACK) -> Endpoint:
        """The server as ``local``, at ``host`` (a name resolved, or its address)."""
        return Endpoint(server="local", url=on_host(self.served.url, host), transport=self.transport)


@pytest.fixture(params=["streamable-http", "sse"])
async def local(request: pytest.FixtureRequest) -> AsyncIterator[Local]:
    transport: Transport = request.param
    async with serve_mcp(make_server(), transport) as served:
        yield Local(served, transport)


async def test_the_public_policy_refuses_a_loopback_server_and_it_receives_nothing(
    task_group: TaskGroup, local: Local
) -> None:
    with anyio.fail_after(10), pytest.raises(ConnectFailed) as refused:
        await Connector(settings(PUBLIC)).connect(local.endpoint(), task_group)
    assert refused.value.reason == f"address 127.0.0.1 is loopback; {ONLY_PUBLIC}"
    assert local.served.requests == []


@TRANSPORTS
async def test_a_name_that_resolves_to_loopback_is_refused_where_the_socket_would_open(
    task_group: TaskGroup, transport: Transport
) -> None:
    # The URL names a public-looking host, so only the check after resolution can refuse it.
    async with blackhole() as hole:
        url = on_host(hole.url, "mcp.example.com")
        connector = Connector(settings(PUBLIC), resolve=resolver({"mcp.example.com": [LOOPBACK]}))
        with anyio.fail_after(10), pytest.raises(ConnectFailed) as refused:
            await connector.connect(Endpoint(server="sneaky", url=url, transport=transport), task_group)
        assert (
            refused.value.reason == f"mcp.example.com resolves to 127.0.0.1, which is loopback; {ONLY_PUBLIC}"
        )
        assert hole.accepted == 0


async def test_a_name_that_does_not_resolve_fails_the_connect_clearly(task_group: TaskGroup) -> None:
    connector = Connector(settings(PUBLIC), resolve=resolver({}))
    target = Endpoint(server="gone", url="https://gone.example.com/mcp")
    with anyio.fail_after(10), pytest.raises(ConnectFailed) as refused:
        await connector.connect(target, task_group)
    assert refused.value.reason == "host not found: gone.example.com does not resolve"


async def test_the_any_policy_connects_to_a_loopback_server(task_group: TaskGroup, local: Local) -> None:
    connector = Connector(settings(EgressPolicy(mode="any")))
    with anyio.fail_after(10):
        assert await echoed(connector, local.endpoint(), task_group, "hi") == "hi"


async def test_an_allowed_network_lets_the_public_policy_reach_a_loopback_server(
    task_group: TaskGroup, local: Local
) -> None:
    policy = EgressPolicy(mode="public", allow=("127.0.0.1/32",))
    with anyio.fail_after(10):
        assert await echoed(Connector(settings(policy)), local.endpoint(), task_group, "allowed") == "allowed"


async def test_an_allowed_host_name_lets_the_public_policy_reach_what_it_resolves_to(
    task_group: TaskGroup, local: Local
) -> None:
    policy = EgressPolicy(mode="public", allow=("localhost",))
    connector = Connector(settings(policy), resolve=resolver({"localhost": [LOOPBACK]}))
    with anyio.fail_after(10):
        assert await echoed(connector, local.endpoint("localhost"), task_group, "by name") == "by name"
        # Only the allowed name: the same server by its address is still refused.
        with pytest.raises(ConnectFailed, match="loopback"):
            await connector.connect(Endpoint(server="local", url=local.served.url), task_group)


# --- The owner's command ----------------------------------------------------------------------


async def test_mcp_add_refuses_a_url_the_policy_refuses_before_asking_for_a_secret_or_saving(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    host = remote_host(
        tmp_path / "data", host_secret, settings=RemoteMcpSettings(connection=settings(PUBLIC))
    )
    with anyio.fail_after(10):
        async with host:
            session = await host.session("console:egress", owner="owner")
            ui = ScriptedUI(answers=["t0ken"])
            reply = await host.handle(
                session, msg("/mcp_add meta http://169.254.169.254/latest --bearer"), ui
            )
            assert reply is not None
            assert reply.text.endswith(
                "This host will not connect to that URL: address 169.254.169.254 is a cloud metadata "
                f"address; {ONLY_PUBLIC}."
            )
            assert ui.asked == []
            assert not (session.workspace / ".volcanic/mcp/servers.json").exists()
