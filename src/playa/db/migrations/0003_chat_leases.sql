-- Schema v3: several processes serve one bot. A chat is served by one process at a time, which
-- holds its lease; the inbox and outbox are named records that any process may take over.
--
-- The v1 Telegram tables were never written; they are replaced by named records of one shape.

-- Which process serves a chat, until when. A holder renews its leases while it lives; a lease
-- past `expires_at` may be taken by any process (the chat moves). `holder` names a process
-- (host, pid and a random part), never a person.
CREATE TABLE chat_leases (
    bot        text NOT NULL,
    chat       text NOT NULL,
    holder     text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (bot, chat)
);
CREATE INDEX chat_leases_holder ON chat_leases (bot, holder);

-- Every update, committed before Telegram gets its 200 (or before the offset moves). The name
-- is Telegram's update id, zero-padded: a redelivered update is the same row, so it is handled
-- once. A handled row keeps its name (its sealed record emptied) for a day, then is pruned.
DROP TABLE telegram_inbox;
CREATE TABLE telegram_inbox (
    bot         text NOT NULL,
    name        text NOT NULL,
    chat        text NOT NULL,
    sealed      bytea NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    handled_at  timestamptz,
    PRIMARY KEY (bot, name)
);
CREATE INDEX telegram_inbox_waiting ON telegram_inbox (bot, chat, name) WHERE handled_at IS NULL;
CREATE INDEX telegram_inbox_handled ON telegram_inbox (bot, handled_at) WHERE handled_at IS NOT NULL;

-- A reply on its way: written before its first part is sent, rewritten as parts are delivered
-- (the count is in the sealed record), deleted after the last. Names sort in the order written.
DROP TABLE telegram_outbox;
CREATE TABLE telegram_outbox (
    bot        text NOT NULL,
    name       text NOT NULL,
    chat       text NOT NULL,
    sealed     bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bot, name)
);
CREATE INDEX telegram_outbox_chat ON telegram_outbox (bot, chat, name);
