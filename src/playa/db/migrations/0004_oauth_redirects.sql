-- Schema v4: a login's redirect may land on any process.
--
-- The process that receives a redirect whose login it does not hold takes the pending login
-- (`oauth_pending`, taken once) and hands the redirect's query here for the process whose login
-- it is. The query holds the authorization code: `sealed` is an AES-GCM seal made by
-- mcp_remote under the host's key, its associated data binding the state's hash, the chat and
-- the server. The waiting process takes it once (`sealed` emptied, `outcome` set to ''), completes
-- the login as if it had received the redirect, and writes `outcome`: what the browser is told.
-- A row is found by the SHA-256 of the state (never the state itself) and kept until `expires_at`.
CREATE TABLE oauth_redirects (
    state_hash bytea PRIMARY KEY CHECK (octet_length(state_hash) = 32),
    sealed     bytea NOT NULL,
    outcome    text,
    expires_at timestamptz NOT NULL
);
CREATE INDEX oauth_redirects_expiry ON oauth_redirects (expires_at);
