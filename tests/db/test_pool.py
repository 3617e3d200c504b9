"""The pool: transactions commit or roll back, and a wrong URL says what is wrong without the password."""

from __future__ import annotations

import logging
import socket
import traceback
from urllib.parse import quote

import pytest

from playa.core.secrets import install_outbound_gate
from playa.db import Database, DatabaseUrl, PoolOptions, upgrade
from playa.exceptions import ConfigError, DatabaseError
from support.postgres import Postgres

pytestmark = pytest.mark.anyio

WRONG = "wrong-Password-9f3ac1e2b7"


def every_text(exc: BaseException) -> str:
    """All an exception can show: its message, repr, arguments, attributes and traceback."""
    return "\n".join(
        [str(exc), repr(exc), repr(exc.args), repr(vars(exc)), "".join(traceback.format_exception(exc))]
    )


def logged(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(f"{r.getMessage()}\n{r.exc_text or ''}" for r in caplog.records)


async def test_a_transaction_commits_when_its_block_ends_and_rolls_back_when_it_raises(
    database_url: str,
) -> None:
    async with await Database.open(DatabaseUrl.parse(database_url)) as db:
        await upgrade(db)
        async with db.transaction() as connection:
            await connection.execute("INSERT INTO audit_heads (chat, head) VALUES ('a', '\\x01')")

        async def fail_after_writing() -> None:
            async with db.transaction() as connection:
                await connection.execute("INSERT INTO audit_heads (chat, head) VALUES ('b', '\\x02')")
                raise ZeroDivisionError

        with pytest.raises(ZeroDivisionError):
            await fail_after_writing()
        async with db.connection() as connection:
            assert await connection.fetchval("SELECT string_agg(chat, ',') FROM audit_heads") == "a"


async def test_a_statement_error_becomes_a_database_error_with_its_sqlstate(database_url: str) -> None:
    async with await Database.open(DatabaseUrl.parse(database_url)) as db:
        with pytest.raises(DatabaseError) as caught:
            async with db.connection() as connection:
                await connection.execute("SELECT * FROM no_such_table")
    assert caught.value.sqlstate == "42P01" and not caught.value.retryable
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def failures(postgres: Postgres) -> list[tuple[str, str]]:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    return [
        (postgres.url(password=WRONG), "password authentication failed"),
        (postgres.url("no_such_database"), "the database does not exist"),
        (f"postgresql://{postgres.user}:{WRONG}@127.0.0.1:{closed}/postgres", "connection refused"),
    ]


@pytest.mark.parametrize("case", [0, 1, 2], ids=["wrong password", "no database", "nothing listens"])
async def test_a_bad_url_gives_a_clear_error_without_the_password_in_it_or_the_logs(
    postgres: Postgres, case: int, caplog: pytest.LogCaptureFixture
) -> None:
    install_outbound_gate()
    caplog.set_level(logging.DEBUG)
    text, reason = failures(postgres)[case]
    url = DatabaseUrl.parse(text)
    with pytest.raises(DatabaseError) as caught:
        await Database.open(url, PoolOptions(connect_timeout=30))
    assert caught.value.reason == reason
    assert url.where in str(caught.value)
    for secret in (WRONG, postgres.password):
        assert secret not in every_text(caught.value)
        assert secret not in logged(caplog)


async def test_the_password_never_appears_in_a_log_record(
    postgres: Postgres, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    install_outbound_gate()
    caplog.set_level(logging.DEBUG)
    url = DatabaseUrl.parse(database_url)
    async with await Database.open(url, PoolOptions(min_size=2, max_size=2)) as db:
        await upgrade(db)
        async with db.transaction() as connection:
            await connection.fetchval("SELECT 1")
        # A library that logs what it was given: the gate has learnt the password from the URL.
        logging.getLogger("asyncpg").warning("connecting with %s", database_url)
        try:
            raise RuntimeError(f"dsn={database_url}")
        except RuntimeError:
            logging.getLogger("some.library").exception("failed")
    assert caplog.records
    assert "connecting with " in logged(
        caplog
    )  # the record is there (the gate may take more than the password)
    assert postgres.password not in logged(caplog)
    assert postgres.password not in repr(db) + repr(url)


def test_pool_options_are_checked_when_made() -> None:
    with pytest.raises(ConfigError, match="sizes"):
        PoolOptions(min_size=5, max_size=2)
    with pytest.raises(ConfigError, match="statement_timeout"):
        PoolOptions(statement_timeout=0)


async def test_a_password_with_reserved_characters_logs_in_percent_encoded(database_url: str) -> None:
    password = "p@ss:w/rd?#%&=" + "x" * 10
    url = DatabaseUrl.parse(database_url)
    async with await Database.open(url) as db, db.connection() as connection:
        # CREATE ROLE takes no parameters: the literal is quoted by the server's own function.
        literal = await connection.fetchval("SELECT quote_literal($1::text)", password)
        await connection.execute(f"CREATE ROLE reserved_chars LOGIN PASSWORD {literal}")
    encoded = quote(password, safe="")
    other = DatabaseUrl.parse(f"postgresql://reserved_chars:{encoded}@{url.host}:{url.port}/{url.database}")
    assert other.password == password
    async with await Database.open(other) as db, db.connection() as connection:
        assert await connection.fetchval("SELECT current_user") == "reserved_chars"
    async with await Database.open(url) as db, db.connection() as connection:
        await connection.execute("DROP ROLE reserved_chars")


async def test_closing_twice_is_closing_once(database_url: str) -> None:
    db = await Database.open(DatabaseUrl.parse(database_url), PoolOptions(min_size=0))
    await db.aclose()
    await db.aclose()
    assert "closed" in repr(db)
    with pytest.raises(DatabaseError):
        async with db.connection():
            pass


async def test_a_transaction_that_lost_a_race_says_it_may_be_run_again(database: Database) -> None:
    await upgrade(database)
    count = "SELECT count(*) FROM history WHERE chat = 'race'"
    add = "INSERT INTO history (chat, seq, message) VALUES ('race', $1, '\\x00')"

    async def write_skew() -> None:
        # Both read the same rows, then each writes what the other read: one of them must fail.
        async with database.transaction(isolation="serializable") as first:
            await first.fetchval(count)
            async with database.transaction(isolation="serializable") as second:
                await second.fetchval(count)
                await second.execute(add, 2)
            await first.execute(add, 1)

    with pytest.raises(DatabaseError) as caught:
        await write_skew()
    assert caught.value.sqlstate == "40001" and caught.value.retryable


async def test_a_statement_that_runs_too_long_is_cancelled(database_url: str) -> None:
    options = PoolOptions(statement_timeout=0.2)
    async with await Database.open(DatabaseUrl.parse(database_url), options) as db:
        with pytest.raises(DatabaseError) as caught:
            async with db.connection() as connection:
                await connection.execute("SELECT pg_sleep(30)")
    assert caught.value.reason == "timed out"
