"""KeyedLocks: one lock a key, made when first needed, dropped on request."""

from __future__ import annotations

import pytest

from playa.core import KeyedLocks


def test_a_key_keeps_its_lock_and_keys_do_not_share_one() -> None:
    locks: KeyedLocks[int] = KeyedLocks()
    assert locks.of(1) is locks.of(1)
    assert locks.of(1) is not locks.of(2)


@pytest.mark.anyio
async def test_an_unused_lock_is_forgotten_and_a_held_one_kept_unless_forgotten_outright() -> None:
    locks: KeyedLocks[str] = KeyedLocks()
    held, idle = locks.of("held"), locks.of("idle")
    async with held:
        locks.forget_unused("held")
        locks.forget_unused("idle")
        assert locks.of("held") is held
        assert locks.of("idle") is not idle
        locks.forget("held")
        assert locks.of("held") is not held
    locks.forget_unused("never made")  # nothing to drop: no error
    locks.forget("never made")
