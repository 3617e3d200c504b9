"""Where remote MCP connections may go: the operator's egress policy, enforced on resolved addresses.

A chat owner chooses the URL, so without a policy a chat could make the host reach what only
the host can reach: a cloud metadata service (169.254.169.254 hands out credentials), an admin
panel on localhost, a database on the private network (server-side request forgery, the first
risk the MCP security best practices name). In ``public`` mode only public addresses are
reached; ``any`` reaches everything (a console on the operator's own machine). The operator
may allow hosts and networks by name or CIDR; chat owners cannot change any of it.

The check that counts runs where the socket is opened: ``GuardedBackend`` resolves the name
itself, refuses the connection unless *every* address the name resolves to passes, and
connects to exactly those checked addresses. A second resolution (DNS rebinding: public for
the check, private for the connect) never happens. TLS still verifies the certificate against
the URL's host name: httpcore passes it to ``start_tls`` apart from the address.
``EgressPolicy.url_refusal`` is the same policy applied to a URL without any network, for an
early and clear answer to ``/mcp_add``; names it cannot judge are judged after resolution.
"""

from __future__ import annotations

import ipaddress
import math
import re
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, get_args
from urllib.parse import urlsplit

import anyio
import httpcore2
import httpx2

from ...exceptions import ConfigError
from ._errors import exception_tree

__all__ = [
    "EgressMode",
    "EgressPolicy",
    "EgressRefused",
    "GuardedBackend",
    "IPAddress",
    "Resolver",
    "find_refusal",
    "guarded_transport",
    "system_resolver",
]

EgressMode = Literal["public", "any"]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""Resolves a host name and port to addresses (as text), in the order to try them; raises OSError when the name does not resolve."""

_ONLY_PUBLIC: Final = "this host only connects to public addresses"

# Cloud instance metadata and host-agent endpoints. Most are link-local or private anyway;
# Azure's wireserver is a public address and is refused only because it is listed here.
_METADATA: Final = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OCI, DigitalOcean, OpenStack …
        "169.254.169.253",  # AWS VPC DNS
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.170.23",  # AWS EKS pod identity
        "169.254.0.23",  # Tencent Cloud
        "169.254.42.42",  # Scaleway
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure wireserver (a public address)
        "192.0.0.192",  # Oracle Cloud Classic
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "fd00:ec2::23",  # AWS EKS pod identity over IPv6
    )
)
_CGNAT: Final = ipaddress.ip_network("100.64.0.0/10")
_BENCHMARKING: Final = (ipaddress.ip_network("198.18.0.0/15"), ipaddress.ip_network("2001:2::/48"))
_DOCUMENTATION: Final = tuple(
    ipaddress.ip_network(n)
    for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32", "3fff::/20")
)
_NAT64: Final = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE: Final = ipaddress.ip_network("::/96")

# Names that only mean something on the local host or network (RFC 6761, RFC 6762, RFC 8375,
# the cloud providers' ``*.internal``). They would resolve to refused addresses anyway; refusing
# the name first gives a clearer answer and does not depend on the local resolver.
_LOCAL_NAMES: Final = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
_LOCAL_SUFFIXES: Final = (".localhost", ".local", ".internal", ".localdomain", ".home.arpa", ".lan")

_LABEL: Final = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")


class EgressRefused(httpcore2.ConnectError):
    """The egress policy refused a connection; ``reason`` says why, for a person.

    A subclass of httpcore's ``ConnectError`` so that httpx2 and the SDK treat it as the
    connect failure it is; ``_connection`` finds it again (``find_refusal``) for its reason.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def find_refusal(exc: BaseException) -> EgressRefused | None:
    """The ``EgressRefused`` inside ``exc`` (its groups, causes and contexts), if there is one."""
    return next((e for e in exception_tree(exc) if isinstance(e, EgressRefused)), None)


def _legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """``host`` read the way ``inet_aton`` and browsers read it: ``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``.

    The system resolver accepts these spellings of an address; a check that only knew
    ``a.b.c.d`` would let ``http://0x7f.1/`` reach 127.0.0.1. None when ``host`` is not one.
    """
    parts = host.split(".")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()
    if not 1 <= len(parts) <= 4:
        return None
    numbers: list[int] = []
    for part in parts:
        try:
            if part[:2].lower() == "0x":
                numbers.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part.startswith("0"):
                numbers.append(int(part, 8))
            elif part.isdigit() and part.isascii():
                numbers.append(int(part))
            else:
                return None
        except ValueError:
            return None
    *leading, last = numbers
    if any(n > 255 for n in leading) or last >= 256 ** (5 - len(numbers)):
        return None
    value = last
    for index, number in enumerate(leading):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _literal(host: str) -> IPAddress | None:
    """The address ``host`` spells (any spelling), or None when it is a name."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return _legacy_ipv4(host)


def _standard(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, str] | None:
    """The IPv4 address an IPv6 address carries, and how: mapped, NAT64, 6to4, Teredo, compatible."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped, "IPv4-mapped"
    if any(address in network for network in _NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF), "NAT64"
    if address.sixtofour is not None:
        return address.sixtofour, "6to4"
    if address.teredo is not None:
        # ``teredo`` undoes the XOR that hides the client's address.
        return address.teredo[1], "Teredo"
    if address in _IPV4_COMPATIBLE and int(address) > 1:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF), "IPv4-compatible"
    return None


def _what(address: IPAddress) -> str | None:
    """Why ``address`` is not public ("loopback", "private" …), or None when it is public."""
    if isinstance(address, ipaddress.IPv6Address):
        # Without its zone (``%eth0``), which would make it unequal to the listed addresses.
        address = ipaddress.IPv6Address(int(address))
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            inner, how = embedded
            inner_what = _what(inner)
            if inner_what is not None:
                return f"{inner_what} (the {how} form of {inner})"
            if how in ("Teredo", "IPv4-compatible"):
                # Tunnel and deprecated forms: nothing public is reached that way.
                return f"reserved (the {how} form of {inner})"
            return None
    if address in _METADATA:
        return "a cloud metadata address"
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if address in _CGNAT:
        return "shared address space (CGNAT)"
    if any(address in network for network in _BENCHMARKING):
        return "reserved for benchmarking"
    if any(address in network for network in _DOCUMENTATION):
        return "reserved for documentation"
    if isinstance(address, ipaddress.IPv4Address) and address == ipaddress.IPv4Address("255.255.255.255"):
        return "broadcast"
    if address.is_reserved:
        return "reserved"
    if address.is_private:
        return "private"
    if not address.is_global:
        return "reserved"
    return None


def _normal_host(host: str) -> str:
    """Lower case, without brackets and without the trailing dot of a fully qualified name."""
    host = host.strip().lower().strip("[]")
    return host[:-1] if host.endswith(".") and not host.endswith("..") else host


def _allow_entry(entry: str) -> IPNetwork | str:
    text = entry.strip().lower()
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        pass
    name = _normal_host(text)
    labels = name.removeprefix("*.").split(".")
    if name and all(_LABEL.match(label) for label in labels):
        return name
    raise ValueError(
        f"egress allow entry {entry!r} is neither a host name (or *.domain) nor an address or CIDR"
    )


@dataclass(frozen=True, kw_only=True)
class EgressPolicy:
    """Which addresses remote MCP connections may reach: the host operator's setting.

    ``mode="public"`` refuses every address that is not public (loopback, private, link-local,
    CGNAT, multicast, reserved, documentation and benchmarking ranges, cloud metadata
    addresses, and IPv6 forms that carry such an IPv4 address) and local names (``localhost``,
    ``*.local``, ``*.internal`` …). ``mode="any"`` refuses nothing. ``allow`` lists exceptions
    that ``public`` lets through: host names (exact, or ``*.example.com`` for its subdomains;
    what an allowed name resolves to is trusted) and addresses or CIDRs.
    """

    mode: EgressMode = "any"
    allow: tuple[str, ...] = ()
    _hosts: frozenset[str] = field(init=False, repr=False, compare=False)
    _networks: tuple[IPNetwork, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in get_args(EgressMode):
            raise ValueError(f"egress mode must be 'public' or 'any', got {self.mode!r}")
        object.__setattr__(self, "allow", tuple(self.allow))
        entries = [_allow_entry(entry) for entry in self.allow]
        object.__setattr__(self, "_hosts", frozenset(e for e in entries if isinstance(e, str)))
        object.__setattr__(self, "_networks", tuple(e for e in entries if not isinstance(e, str)))

    @classmethod
    def parse(cls, mode: str | None, allow: str | None, *, default: EgressMode) -> EgressPolicy:
        """A policy from configuration text: ``mode`` ("public" or "any", None for ``default``), ``allow`` comma-separated.

        Raises:
            ConfigError: The mode or an allow entry is not valid; the message says which.
        """
        chosen = (mode or "").strip().lower() or default
        if chosen not in get_args(EgressMode):
            raise ConfigError(f"egress mode must be 'public' or 'any', got {mode!r}")
        entries = tuple(e.strip() for e in (allow or "").split(",") if e.strip())
        try:
            return cls(mode=chosen, allow=entries)  # type: ignore[arg-type]  # checked just above
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc

    @property
    def checks(self) -> bool:
        """True when the policy refuses anything (``public``); ``any`` needs no checks."""
        return self.mode == "public"

    def host_allowed(self, host: str) -> bool:
        """True when the operator allowed ``host`` by name (exactly, or by a ``*.`` entry)."""
        name = _normal_host(host)
        if name in self._hosts:
            return True
        return any(entry.startswith("*.") and name.endswith(entry[1:]) for entry in self._hosts)

    def address_refusal(self, address: IPAddress, *, spelled: str | None = None) -> str | None:
        """Why ``address`` may not be reached (a sentence for a person), or None when it may.

        ``spelled`` is how the URL wrote it, when that differs (``2130706433``).
        """
        if not self.checks or any(address in network for network in self._networks):
            return None
        what = _what(address)
        if what is None:
            return None
        shown = str(address) if spelled is None or _standard(spelled) else f"{spelled} ({address})"
        return f"address {shown} is {what}; {_ONLY_PUBLIC}"

    def resolved_refusal(self, host: str, addresses: Iterable[IPAddress]) -> str | None:
        """Why a name resolved to ``addresses`` may not be reached: one refused address refuses it."""
        if not self.checks or self.host_allowed(host):
            return None
        for address in addresses:
            if any(address in network for network in self._networks):
                continue
            what = _what(address)
            if what is not None:
                return f"{_normal_host(host)} resolves to {address}, which is {what}; {_ONLY_PUBLIC}"
        return None

    def host_refusal(self, host: str) -> str | None:
        """Why ``host`` (a name or an address in any spelling) may not be reached before any DNS, or None."""
        if not self.checks or self.host_allowed(host):
            return None
        name = _normal_host(host)
        literal = _literal(name)
        if literal is not None:
            return self.address_refusal(literal, spelled=name)
        if name in _LOCAL_NAMES or name.endswith(_LOCAL_SUFFIXES):
            return f"{name} is a local name; {_ONLY_PUBLIC}"
        if "." not in name:
            # A single label is completed with the host's search domains: an internal name.
            return f"{name} is a single-label (local) name; {_ONLY_PUBLIC}"
        return None

    def url_refusal(self, url: str) -> str | None:
        """Why ``url`` may not be reached, judged without any network (None: resolve and check again).

        The host is judged, whatever userinfo comes before it (``http://good@127.0.0.1`` is a
        loopback URL): the store keeps userinfo as a sealed credential and shows it masked,
        ``[redacted]@127.0.0.1``, so it disguises nothing.
        """
        try:
            parts = urlsplit(url)
            host = parts.hostname
        except ValueError:
            return "the URL cannot be parsed"
        if not host:
            return "the URL has no host"
        return self.host_refusal(host)


async def system_resolver(host: str, port: int) -> list[str]:
    """The system's resolver (``getaddrinfo``), answers in its order, without duplicates."""
    answers = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(sockaddr[0]) for *_, sockaddr in answers))


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """An httpcore network backend that resolves, checks every address, and connects to a checked one.

    ``resolve`` is the DNS seam (``system_resolver`` by default); ``network_backend`` opens the
    TCP connection to an address literal (httpcore's anyio backend by default).
    """

    def __init__(
        self,
        policy: EgressPolicy,
        *,
        resolve: Resolver | None = None,
        network_backend: httpcore2.AsyncNetworkBackend | None = None,
    ) -> None:
        self._policy = policy
        self._resolve: Resolver = resolve if resolve is not None else system_resolver
        self._inner = network_backend if network_backend is not None else httpcore2.AnyIOBackend()

    async def addresses(self, host: str, port: int) -> list[IPAddress]:
        """The addresses to connect to for ``host``, all checked.

        Raises:
            EgressRefused: The policy refuses the host or one of its addresses, or it does not resolve.
        """
        literal = _literal(host)
        if literal is not None:
            if refusal := self._policy.address_refusal(literal, spelled=host):
                raise EgressRefused(refusal)
            return [literal]
        if refusal := self._policy.host_refusal(host):
            raise EgressRefused(refusal)
        try:
            answers = await self._resolve(host, port)
        except OSError as exc:
            raise EgressRefused(f"host not found: {_normal_host(host)} does not resolve") from exc
        addresses: list[IPAddress] = []
        for answer in answers:
            try:
                addresses.append(ipaddress.ip_address(answer))
            except ValueError:
                raise EgressRefused(
                    f"host not found: {_normal_host(host)} resolved to something that is not an address"
                ) from None
        if not addresses:
            raise EgressRefused(f"host not found: {_normal_host(host)} has no address")
        if refusal := self._policy.resolved_refusal(host, addresses):
            raise EgressRefused(refusal)
        return addresses

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        deadline = anyio.current_time() + (timeout if timeout is not None else math.inf)
        try:
            with anyio.fail_after(timeout):
                addresses = await self.addresses(host, port)
        except TimeoutError as exc:
            raise httpcore2.ConnectTimeout(f"resolving {_normal_host(host)} timed out") from exc
        error: httpcore2.ConnectError | httpcore2.ConnectTimeout | None = None
        for address in addresses:
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                break
            try:
                # The checked address itself, never the name: nothing is resolved a second time.
                return await self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=None if math.isinf(remaining) else remaining,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                error = exc
        if error is not None:
            raise error
        raise httpcore2.ConnectTimeout(f"connecting to {_normal_host(host)} timed out")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise EgressRefused("unix sockets are not remote servers")

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


class _GuardedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport over a connection pool whose sockets come from a ``GuardedBackend``."""

    def __init__(self, *, ssl_context: ssl.SSLContext, backend: GuardedBackend) -> None:
        super().__init__(verify=ssl_context, trust_env=False)
        # httpx2's transport has no network-backend argument, but its pool has: the pool is
        # rebuilt with httpx2's defaults and the guarded backend. ``_pool`` is what its
        # ``handle_async_request`` uses; tests/mcp_remote/test_egress.py notices if that changes.
        limits = httpx2.Limits(max_connections=100, max_keepalive_connections=20)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=backend,
        )


def guarded_transport(
    policy: EgressPolicy,
    *,
    ssl_context: ssl.SSLContext,
    resolve: Resolver | None = None,
    network_backend: httpcore2.AsyncNetworkBackend | None = None,
) -> httpx2.AsyncBaseTransport:
    """An httpx2 transport that only opens connections ``policy`` allows, to the addresses it checked.

    ``resolve`` and ``network_backend`` are ``GuardedBackend``'s seams. No proxy is used: a proxy
    would resolve and connect on its own, out of the policy's reach.
    """
    backend = GuardedBackend(policy, resolve=resolve, network_backend=network_backend)
    return _GuardedTransport(ssl_context=ssl_context, backend=backend)
