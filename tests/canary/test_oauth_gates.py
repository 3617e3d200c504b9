"""The credential gates with OAuth's secrets: a real ``playa chat`` process logs in, calls, refreshes
and removes a server protected by a real authorization server (npm oidc-provider), on loopback.

The owner uses a pre-registered confidential client (``--client-id … --client-secret``, the
secret asked for privately), so every OAuth secret is in play: the client secret, the
authorization code, the PKCE code_verifier, the access and refresh tokens.

The oracle: no request body the model provider received, no line of stderr (at DEBUG), no reply
on stdout and no file under the data dir but the sealed store holds any of them in any form
:mod:`support.leaks` finds. The code_verifier is never seen by the test: any 128 characters whose
S256 hash is the link's code_challenge are it.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from mcp.client.auth import PKCEParameters

from playa.mcp_remote import ServerStore
from playa.mcp_remote.store import Sealer
from servers.echo_oauth import echo_oauth_server
from servers.oidc import STATIC_CLIENT_ID, authorization_server
from support.canary import HOST_SECRET, console_process, files_under
from support.leaks import leaks
from support.oauth import protected_server, sign_in_elsewhere
from support.providers import ProviderServer, serve_provider, text, tool_call

SCOPE = "console:default"
NO_PROXY = {"NO_PROXY": "*"}
_VERIFIER_RUN = re.compile(r"[A-Za-z0-9\-._~]{128,}")


def verifier_in(text: str, challenge: str) -> bool:
    """Whether ``text`` holds the code_verifier behind ``challenge`` (RFC 7636 S256)."""
    for run in _VERIFIER_RUN.findall(text):
        for start in range(len(run) - 127):
            candidate = run[start : start + 128].encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(candidate).digest()).rstrip(b"=").decode()
            if digest == challenge:
                return True
    return False


def channels_of(out: str, err: str, provider: ProviderServer, data_dir: Path) -> dict[str, str]:
    """Every channel of a run, by name: stdout, stderr, each model request, each file but the
    sealed store."""
    return {
        "stdout": out,
        "stderr": err,
        **{f"model request {i}": r.raw.decode("latin-1") for i, r in enumerate(provider.requests)},
        **{
            str(path): data.decode("latin-1")
            for path, data in files_under(data_dir)
            if path.name != "servers.json"
        },
    }


@pytest.mark.anyio
@pytest.mark.npm
async def test_no_oauth_secret_reaches_the_model_a_log_a_reply_or_a_file(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    async with (
        authorization_server() as auth,
        protected_server(auth) as mcp,
        serve_provider() as provider,
    ):
        provider.script(tool_call("linear__whoami", {}), text("noted"))
        async with console_process(data_dir, provider, tmp_path / "stderr.log", NO_PROXY) as console:
            await console.say(f"/mcp_add linear {mcp.url} --client-id {STATIC_CLIENT_ID} --client-secret")
            await console.wait_for("Send the client secret for linear")
            await console.say(auth.static_secret)
            link = (await console.wait_for(rf"^{re.escape(auth.issuer)}/auth\?\S+$")).group(0)
            challenge = parse_qs(urlsplit(link).query)["code_challenge"][0]
            ended_at = await sign_in_elsewhere(link)
            code = parse_qs(urlsplit(ended_at).query)["code"][0]
            async with httpx2.AsyncClient() as browser:  # the owner's browser reaches the callback
                page = await browser.get(ended_at)
            assert "received the login for linear" in page.text
            await console.wait_for("Logged in to linear: connected")

            mark = len(console.out)
            await console.say("please use whoami")
            await console.wait_for("noted", after=mark)
            (path,) = [p for p in data_dir.rglob("servers.json") if p.parent.parent.name == ".volcanic"]
            (entry,) = (
                ServerStore(path.parent.parent.parent, SCOPE, Sealer(HOST_SECRET.encode())).load().entries
            )
            assert entry.oauth is not None and entry.oauth.client is not None
            assert entry.oauth.client.client_secret == auth.static_secret
            tokens = entry.oauth.secrets - {auth.static_secret}
            assert len(tokens) == 2  # the access and refresh tokens

            mark = len(console.out)
            await console.say("/mcp_remove linear")
            await console.wait_for("Its tokens were revoked", after=mark)
            assert await console.end() == 0
    out, err = console.out, (tmp_path / "stderr.log").read_text(errors="replace")
    assert "DEBUG httpx2" in err or "DEBUG httpcore" in err  # the libraries did log at DEBUG
    assert provider.pending == 0 and len(provider.requests) >= 2
    channels = channels_of(out, err, provider, data_dir)
    for where, seen in channels.items():
        assert leaks({*tokens, code, auth.static_secret}, seen) == [], where
    for where, seen in channels.items():
        assert not verifier_in(seen, challenge), where


def test_the_verifier_oracle_finds_a_verifier_inside_other_text() -> None:
    pkce = PKCEParameters.generate()
    assert verifier_in(
        f"grant_type=authorization_code&code_verifier={pkce.code_verifier}x~", pkce.code_challenge
    )
    assert not verifier_in(pkce.code_verifier[:-1] + "!", pkce.code_challenge)


@pytest.mark.anyio
async def test_a_server_that_echoes_the_code_and_the_verifier_and_a_pasted_redirect_leak_into_nothing(
    tmp_path: Path,
) -> None:
    """The login's own secrets (the code, the PKCE verifier, the state), echoed by a server that is
    its own authorization server, after the owner pasted the redirect address as a plain line."""
    data_dir = tmp_path / "data"
    async with echo_oauth_server() as server, serve_provider() as provider:
        provider.script(tool_call("echo__login_secrets", {}), text("noted"))
        async with console_process(data_dir, provider, tmp_path / "stderr.log", NO_PROXY) as console:
            await console.say(f"/mcp_add echo {server.url}")
            link = (await console.wait_for(rf"^{re.escape(server.issuer)}/authorize\?\S+$")).group(0)
            async with httpx2.AsyncClient() as browser:
                ended_at = (await browser.get(link)).headers["location"]
            state = parse_qs(urlsplit(ended_at).query)["state"][0]
            mark = len(console.out)
            await console.say(ended_at)  # the owner forgot /mcp_auth echo --paste
            await console.wait_for("Playa received the login for echo", after=mark)
            await console.wait_for("Logged in to echo: connected", after=mark)

            mark = len(console.out)
            await console.say("what did the server learn of the login?")
            await console.wait_for("noted", after=mark)
            assert await console.end() == 0
    out, err = console.out, (tmp_path / "stderr.log").read_text(errors="replace")
    assert provider.pending == 0
    # The tool's result reached the model, with the secrets in it redacted.
    assert any("code=[redacted] verifier=[redacted]" in r.raw.decode() for r in provider.requests)
    # The link above carries the state: stdout counts from the login on.
    channels = channels_of(out[out.index("Playa received the login") :], err, provider, data_dir)
    assert server.codes and server.verifiers
    for where, seen in channels.items():
        assert leaks({*server.secrets, state}, seen) == [], where
