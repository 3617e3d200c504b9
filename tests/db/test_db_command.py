"""``playa db upgrade``: the schema from the command line, and what it says when it cannot."""

from __future__ import annotations

import pytest

from playa.cli import main
from playa.db import ENV_DATABASE_URL, latest_version
from support.postgres import Postgres


def test_upgrade_brings_the_schema_then_finds_nothing_to_do(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(ENV_DATABASE_URL, database_url)
    assert main(["db", "upgrade"]) == 0
    assert f"from version 0 to {latest_version()} (1 state" in capsys.readouterr().out
    assert main(["db", "upgrade"]) == 0
    assert f"at version {latest_version()}: nothing to do" in capsys.readouterr().out


def test_upgrade_without_the_variable_says_what_to_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(ENV_DATABASE_URL, raising=False)
    assert main(["db", "upgrade"]) == 2
    assert f"{ENV_DATABASE_URL} is not set" in capsys.readouterr().err


def test_upgrade_with_a_wrong_password_fails_without_showing_it(
    postgres: Postgres, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = "not-the-password-5b1f0e"
    monkeypatch.setenv(ENV_DATABASE_URL, postgres.url(password=wrong))
    assert main(["db", "upgrade"]) == 1
    out, err = capsys.readouterr()
    assert "password authentication failed" in err
    assert f"{postgres.host}:{postgres.port}/postgres" in err
    assert wrong not in out + err and postgres.password not in out + err
