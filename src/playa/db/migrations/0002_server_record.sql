-- Schema v2: the server store's record is sealed.
--
-- A database has no place outside the rows that only Playa writes (the file backend keeps its
-- rollback record in the chat's private folder), so the record of a chat's last write is an
-- AES-GCM seal made by mcp_remote/store under the host's key: it binds the chat's scope, the
-- generation, the number of rows and a digest of every row (name, generation, bytes). A row put
-- back from an earlier write, deleted or added no longer matches it. `digest` stays unused: the
-- sealed record holds the digest, and an unsealed copy of it would prove nothing.
ALTER TABLE server_stores ADD COLUMN record bytea;
