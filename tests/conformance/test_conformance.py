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
# Every client scenario of 0.2.0-alpha.12 that applies to Playa. Not run: the auth/* extension
# scenarios the OAuth issue names (client credentials, DPoP, enterprise-managed, workload identity)
# and the sep-2640 skills extension, which a client without skills has nothing to do for.
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
]
CLIENT_TIMEOUT_MS = 60_000
RUN_TIMEOUT_S = 120.0

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
    return [
        pytest.param(name, marks=pytest.mark.xfail(reason=failures[name], strict=True))
        if name in failures
        else name
        for name in SCENARIOS
    ]


def run_scenario(scenario: str, output_dir: Path) -> tuple[int, str, list[dict[str, Any]]]:
    """Run one client scenario; return the suite's exit code, its output, and its checks."""
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
            str(CLIENT_TIMEOUT_MS),
            "--output-dir",
            str(output_dir),
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
        output, _ = process.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"conformance scenario {scenario} ran longer than {RUN_TIMEOUT_S} s:\n{output}")
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


@pytest.mark.parametrize("scenario", _params())
def test_client_passes_conformance_scenario(scenario: str, tmp_path: Path) -> None:
    returncode, output, checks = run_scenario(scenario, tmp_path)
    judged = [check for check in checks if check["status"] in ("SUCCESS", "FAILURE", "WARNING")]
    not_passed = [
        f"{c['id']}: {c['status']} {c.get('errorMessage', '')}" for c in judged if c["status"] != "SUCCESS"
    ]
    assert judged, f"the suite judged nothing for {scenario}:\n{output}"
    assert not not_passed, "\n".join(not_passed) + "\n" + output
    assert returncode == 0, output
