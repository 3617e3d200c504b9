"""The official MCP conformance suite's client scenarios, run against our client adapter."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from servers.node import node_path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CONFORMANCE = HERE.parent / "servers" / "node_modules" / ".bin" / "conformance"
ADAPTER = HERE / "client.py"
EXPECTED_FAILURES = HERE / "expected-failures.txt"

AUTH_SCENARIOS = [
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
]
# The auth extensions: client credentials (secret and private_key_jwt) and DPoP (with and without
# nonces) pass; expected-failures.txt says why the other two do not.
AUTH_EXTENSION_SCENARIOS = [
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/enterprise-managed-authorization",
    "auth/dpop",
    "auth/dpop-nonce",
    "auth/wif-jwt-bearer",
]
# The skills extension's client scenarios (SEP-2640): no file read ahead of need, and each
# file checked against its entry (digest, size, front matter) before anything of it is used.
SKILLS_SCENARIOS = [
    "sep-2640-client-no-prefetch",
    "sep-2640-client-verify-digest",
    "sep-2640-client-verify-size",
    "sep-2640-client-verify-frontmatter",
]
# Every client scenario of 0.2.0-alpha.12 that applies to Playa.
SCENARIOS = [
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "request-metadata",
    "sep-2322-client-request-state",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
    "json-schema-ref-no-deref",
    "json-schema-2020-12-preservation",
    *AUTH_SCENARIOS,
    *AUTH_EXTENSION_SCENARIOS,
    *SKILLS_SCENARIOS,
]
# The auth scenarios that both requirement sets hold: by default the suite runs them at
# 2025-11-25 (the initialize handshake); they also run at 2026-07-28, the stateless protocol,
# where they check more (application_type at registration, the scope union on step-up).
BOTH_VERSIONS = AUTH_SCENARIOS[: AUTH_SCENARIOS.index("auth/pre-registration") + 1]
LATEST = "2026-07-28"
CLIENT_TIMEOUT_MS = 60_000
AUTH_CLIENT_TIMEOUT_MS = 120_000
"""An auth scenario runs a whole host, a login and a tool call: generous, for a busy machine."""

pytestmark = pytest.mark.npm


def expected_failures() -> dict[str, str]:
    """Scenario name -> reason, from expected-failures.txt (``name  # reason`` per line)."""
    failures: dict[str, str] = {}
    for line in EXPECTED_FAILURES.read_text().splitlines():
        name, _, reason = line.partition("#")
        if name.strip():
            failures[name.strip()] = reason.strip() or "listed in expected-failures.txt"
    return failures


def _params() -> list[Any]:
    failures = expected_failures()
    unknown = set(failures) - set(SCENARIOS)
    assert not unknown, f"expected-failures.txt names scenarios that are not run: {sorted(unknown)}"
    legs = [(name, None) for name in SCENARIOS] + [(name, LATEST) for name in BOTH_VERSIONS]
    return [
        pytest.param(
            name,
            version,
            id=name if version is None else f"{name}@{version}",
            marks=[pytest.mark.xfail(reason=failures[name], strict=True)] if name in failures else [],
        )
        for name, version in legs
    ]


def run_scenario(
    scenario: str, output_dir: Path, spec_version: str | None = None
) -> tuple[int, str, list[dict[str, Any]]]:
    """Run one client scenario (at the suite's version for it, or ``spec_version``); return the
    suite's exit code, its output, and its checks."""
    client_timeout_ms = AUTH_CLIENT_TIMEOUT_MS if scenario.startswith("auth/") else CLIENT_TIMEOUT_MS
    run_timeout = client_timeout_ms / 1000 + 60.0
    # The suite splits --command on spaces and runs it through a shell, so quoted paths survive.
    command = " ".join(shlex.quote(part) for part in (sys.executable, str(ADAPTER)))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])),
        # The suite's scripts start with `#!/usr/bin/env node`: Node 24 of the dev extra first.
        "PATH": node_path(),
    }
    process = subprocess.Popen(
        [
            str(CONFORMANCE),
            "client",
            "--command",
            command,
            "--scenario",
            scenario,
            "--timeout",
            str(client_timeout_ms),
            "--output-dir",
            str(output_dir),
            *(["--spec-version", spec_version] if spec_version else []),
        ],
        cwd=output_dir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # so a timeout can kill the suite and the client it started
    )
    try:
        output, _ = process.communicate(timeout=run_timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"conformance scenario {scenario} ran longer than {run_timeout} s:\n{output}")
    checks: list[dict[str, Any]] = []
    for path in output_dir.rglob("checks.json"):
        checks.extend(json.loads(path.read_text()))
    return process.returncode, output, checks


@pytest.fixture(scope="module", autouse=True)
def _require_suite() -> None:
    if shutil.which("node", path=node_path()) is None:
        pytest.skip("node is not installed: `./dev test` installs Node 24 with the dev extra")
    if not CONFORMANCE.exists():
        pytest.skip("the MCP conformance suite is not installed: run `npm ci --prefix tests/servers`")


def test_expected_failures_file_names_only_known_scenarios() -> None:
    assert set(expected_failures()) <= set(SCENARIOS)


@pytest.mark.parametrize(("scenario", "spec_version"), _params())
def test_client_passes_conformance_scenario(scenario: str, spec_version: str | None, tmp_path: Path) -> None:
    returncode, output, checks = run_scenario(scenario, tmp_path, spec_version)
    judged = [check for check in checks if check["status"] in ("SUCCESS", "FAILURE", "WARNING")]
    not_passed = [
        f"{c['id']}: {c['status']} {c.get('errorMessage', '')}" for c in judged if c["status"] != "SUCCESS"
    ]
    assert judged, f"the suite judged nothing for {scenario}:\n{output}"
    assert not not_passed, "\n".join(not_passed) + "\n" + output
    assert returncode == 0, output
