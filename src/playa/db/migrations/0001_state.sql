-- Schema v1: every piece of state a Playa process keeps, in PostgreSQL instead of a data dir.
--
-- The database is a store of opaque bytes. What the file backend seals is sealed here too, by
-- the same code (mcp_remote/store), before it reaches a row: `sealed` columns hold AES-GCM
-- envelopes whose associated data names the chat (its scope) and, for the server store, the
-- generation below. So a reader of the database learns no credential, and a row changed, moved
-- to another chat or rolled back fails verification as a file does. Only what a query must
-- find (chat, server name, sequence numbers, times, sizes) is in clear.
--
-- `chat` is always the chat's scope (`telegram:123`, `console:owner`): the text the seals bind.

-- The key id of the host secret that sealed the rows (one per purpose): a process started with
-- another secret is refused at once instead of failing every row it reads.
CREATE TABLE host_keys (
    purpose    text PRIMARY KEY,
    key_id     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- The server store of each chat. This row is its lock (a write takes it FOR UPDATE, a read of
-- the entries happens in the same snapshot) and its rollback record: `generation` grows with
-- every write and is sealed into each entry written then; `digest` is the SHA-256 of the
-- entries of that generation, in name order, and `entries` their number.
CREATE TABLE server_stores (
    chat       text PRIMARY KEY,
    generation bigint NOT NULL DEFAULT 0 CHECK (generation >= 0),
    digest     bytea,
    entries    integer NOT NULL DEFAULT 0 CHECK (entries >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- One remote MCP server of a chat: the entry as the file holds it (visible fields and seal,
-- canonical JSON), with the generation that sealed it.
CREATE TABLE servers (
    chat       text NOT NULL REFERENCES server_stores (chat) ON DELETE CASCADE,
    name       text NOT NULL,
    generation bigint NOT NULL CHECK (generation >= 0),
    entry      bytea NOT NULL,
    PRIMARY KEY (chat, name)
);

-- OAuth: a server's grant (client registration and tokens), sealed; refreshed without
-- rewriting the server's entry.
CREATE TABLE oauth_grants (
    chat       text NOT NULL,
    server     text NOT NULL,
    sealed     bytea NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chat, server)
);

-- A login begun on one process and completed by whichever receives the callback. Found by the
-- SHA-256 of its `state` parameter: the state itself, a bearer of the login, is never stored.
CREATE TABLE oauth_pending (
    state_hash bytea PRIMARY KEY CHECK (octet_length(state_hash) = 32),
    chat       text NOT NULL,
    server     text NOT NULL,
    sealed     bytea NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX oauth_pending_expiry ON oauth_pending (expires_at);

-- The digests of the tool definitions the owner approved or rejected, per server, sealed.
CREATE TABLE tool_pins (
    chat       text NOT NULL,
    server     text NOT NULL,
    sealed     bytea NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chat, server)
);

-- A question to the owner about changed tools, waiting for a button press that any process
-- may receive: found by the digest the button carries.
CREATE TABLE pending_approvals (
    chat       text NOT NULL,
    server     text NOT NULL,
    digest     text NOT NULL,
    sealed     bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chat, server, digest)
);

-- A chat's conversation: one pydantic-ai message a row, as a line of history.jsonl.
CREATE TABLE history (
    chat    text NOT NULL,
    seq     bigint NOT NULL CHECK (seq > 0),
    message bytea NOT NULL,
    PRIMARY KEY (chat, seq)
);

-- A chat's workspace: the agent's files (never under .volcanic/, which the store refuses).
-- `workspace_usage.bytes` is kept equal to the sum of the chat's file sizes by the trigger
-- below, in the writing transaction, so the per-chat quota is checked against the truth.
CREATE TABLE workspace_files (
    chat       text NOT NULL,
    path       text NOT NULL CHECK (path <> '' AND path NOT LIKE '/%'),
    content    bytea NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chat, path)
);
CREATE TABLE workspace_usage (
    chat  text PRIMARY KEY,
    bytes bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0),
    files integer NOT NULL DEFAULT 0 CHECK (files >= 0)
);
CREATE FUNCTION workspace_account() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE workspace_usage
           SET bytes = bytes - octet_length(OLD.content), files = files - 1
         WHERE chat = OLD.chat;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO workspace_usage AS u (chat, bytes, files)
        VALUES (NEW.chat, octet_length(NEW.content), 1)
        ON CONFLICT (chat) DO UPDATE
           SET bytes = u.bytes + octet_length(NEW.content), files = u.files + 1;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER workspace_account AFTER INSERT OR UPDATE OR DELETE ON workspace_files
    FOR EACH ROW EXECUTE FUNCTION workspace_account();

-- Telegram: every update committed before Telegram gets its 200 (or the offset moves), handled
-- in order per chat, each once. `update_id` is Telegram's: a redelivered update is the same row.
CREATE TABLE telegram_inbox (
    bot         text NOT NULL,
    update_id   bigint NOT NULL,
    chat        text,
    sealed      bytea NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    handled_at  timestamptz,
    PRIMARY KEY (bot, update_id)
);
CREATE INDEX telegram_inbox_waiting ON telegram_inbox (bot, chat, update_id) WHERE handled_at IS NULL;

-- A reply on its way: written in the turn's transaction, deleted once its last part is
-- delivered; `delivered` counts the parts already sent, so a resumed reply sends only the rest.
CREATE TABLE telegram_outbox (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    bot         text NOT NULL,
    chat        text NOT NULL,
    sealed      bytea NOT NULL,
    delivered   integer NOT NULL DEFAULT 0 CHECK (delivered >= 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    deliver_by  timestamptz NOT NULL
);
CREATE INDEX telegram_outbox_chat ON telegram_outbox (bot, chat, id);

-- A chat's audit log: each record as its line in the file (chained and MACed by the host);
-- the head (last sequence number and hash, sealed) says how far the log went.
CREATE TABLE audit_records (
    chat   text NOT NULL,
    seq    bigint NOT NULL CHECK (seq > 0),
    record bytea NOT NULL,
    PRIMARY KEY (chat, seq)
);
CREATE TABLE audit_heads (
    chat text PRIMARY KEY,
    head bytea NOT NULL
);
