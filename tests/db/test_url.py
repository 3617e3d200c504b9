"""PLAYA_DATABASE_URL: read into the driver's arguments, its password in no text and known to the log gate."""

from __future__ import annotations

import pytest

from playa.core.secrets import outbound_secrets
from playa.db import ENV_DATABASE_URL, DatabaseUrl, database_url
from playa.exceptions import ConfigError

PASSWORD = "s3cret-Pa55word-for-the-test"


def test_a_url_gives_each_connection_argument() -> None:
    url = DatabaseUrl.parse(
        f"postgresql://playa:{PASSWORD}@db.example:6543/state?sslmode=verify-full&application_name=bot"
    )
    assert (url.host, url.port, url.user, url.password, url.database) == (
        "db.example",
        6543,
        "playa",
        PASSWORD,
        "state",
    )
    assert (url.sslmode, url.application_name, url.connect_timeout) == ("verify-full", "bot", None)


def test_the_password_is_in_no_text_of_the_url() -> None:
    url = DatabaseUrl.parse(f"postgres://playa:{PASSWORD}@localhost/state")
    for text in (repr(url), str(url), url.shown, url.where):
        assert PASSWORD not in text
    assert url.shown == "postgresql://playa:[redacted]@localhost:5432/state"
    assert url.where == "localhost:5432/state"


def test_the_log_gate_learns_the_password_as_soon_as_the_url_is_read() -> None:
    password = "only-in-this-test-" + "x" * 12
    DatabaseUrl.parse(f"postgresql://playa:{password}@localhost/state")
    assert password in outbound_secrets()


def test_percent_encoded_parts_and_an_ipv6_host_and_a_socket_folder() -> None:
    url = DatabaseUrl.parse("postgresql://us%40er:p%3Ass%2Fword-long@[::1]:5433/my%20db?connect_timeout=2.5")
    assert (url.user, url.password, url.host, url.port, url.database) == (
        "us@er",
        "p:ss/word-long",
        "::1",
        5433,
        "my db",
    )
    assert url.connect_timeout == 2.5
    assert url.where == "[::1]:5433/my db"
    socket = DatabaseUrl.parse("postgresql://playa@/state?host=/run/postgresql")
    assert (socket.host, socket.password) == ("/run/postgresql", None)
    assert socket.where == "/run/postgresql (socket)/state"


BAD = [
    (f"mysql://playa:{PASSWORD}@localhost/state", "must start with postgresql://"),
    (f"postgresql://playa:{PASSWORD}@/state", "names no host"),
    (f"postgresql://playa:{PASSWORD}@localhost", "names no database"),
    (f"postgresql://playa:{PASSWORD}@localhost/", "names no database"),
    (f"postgresql://playa:{PASSWORD}@localhost/a/b", "names no database"),
    (f"postgresql://:{PASSWORD}@localhost/state", "names no user"),
    (f"postgresql://playa:{PASSWORD}@localhost:99999/state", "port"),
    (f"postgresql://playa:{PASSWORD}@localhost:http/state", "port"),
    (
        f"postgresql://playa:{PASSWORD}@localhost/state?password={PASSWORD}",
        "parameters Playa does not take: password",
    ),
    (f"postgresql://playa:{PASSWORD}@localhost/state?sslmode=maybe", "sslmode=maybe"),
    (f"postgresql://playa:{PASSWORD}@localhost/state?sslmode=require&sslmode=disable", "repeats"),
    (f"postgresql://playa:{PASSWORD}@a,b/state", "several hosts"),
    (f"postgresql://playa:{PASSWORD}@localhost/state?connect_timeout=-1", "connect_timeout"),
    (f"postgresql://playa:{PASSWORD}@[::1/state", "is not a URL"),
    ("postgresql://playa:Xq7zP@localhost/state", "password of 5 characters"),
]


@pytest.mark.parametrize(("text", "says"), BAD)
def test_a_bad_url_is_refused_with_the_fix_and_without_the_password(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        DatabaseUrl.parse(text)
    message = str(caught.value)
    assert says in message
    assert ENV_DATABASE_URL in message and "postgresql://user:password@host:5432/database" in message
    assert PASSWORD not in message and "Xq7zP" not in message
    assert caught.value.__cause__ is None


def test_without_the_variable_there_is_no_database() -> None:
    assert database_url({}) is None
    assert database_url({ENV_DATABASE_URL: "  "}) is None
    found = database_url({ENV_DATABASE_URL: f"postgresql://playa:{PASSWORD}@localhost/state"})
    assert found is not None and found.database == "state"


def test_the_shown_url_is_the_url_without_its_password() -> None:
    assert DatabaseUrl.parse("postgresql://a%40b@[::1]/x%2Fy").shown == "postgresql://a%40b@[::1]:5432/x%2Fy"
    socket = DatabaseUrl.parse(f"postgresql://playa:{PASSWORD}@/state?host=/run/pg")
    assert socket.shown == "postgresql://playa:[redacted]@/state?host=/run/pg"
