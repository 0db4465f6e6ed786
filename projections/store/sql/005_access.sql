-- The console's security records: the access log (an append-only hash chain of security events)
-- and console sessions (append-only start and end rows). Written by the store's one writer: the
-- console in embedded mode; in the streaming deployment the projector stores the access log from
-- its topic, and the console (in the projector's process, under its write lock) its sessions.

-- Grain: one row per access entry (entry_id), in chain order (seq). Upstream: the console (or the
-- access-log topic). hash = SHA-256 of the entry's canonical JSON with seq, prev_hash and
-- hash_version (schemas/access.py, record_hash): hash_version 2 is RFC 8785; NULL is an entry
-- written by dealtrail 0.2.0 (its own encoding, still verified so). Nothing is updated or
-- deleted. No password or token is in it.
CREATE TABLE IF NOT EXISTS access_log (
    seq         BIGINT NOT NULL,
    entry_id    VARCHAR NOT NULL,
    logged_at   TIMESTAMPTZ NOT NULL,
    user_name   VARCHAR NOT NULL,
    client      VARCHAR NOT NULL,
    kind        VARCHAR NOT NULL,
    outcome     VARCHAR NOT NULL,
    detail      VARCHAR NOT NULL,
    prev_hash   VARCHAR,
    hash        VARCHAR NOT NULL
);
-- added after 0.2.0: the entries stored before keep NULL (0.2.0's encoding)
ALTER TABLE access_log ADD COLUMN IF NOT EXISTS hash_version INTEGER;

-- Grain: one row per start or end of a console session (session_hash, kind). session_hash is the
-- SHA-256 of the session's random ID (the cookie holds the ID, the store only its hash);
-- user_changed_at is the user's revision (dim_users.changed_at) the session was started under:
-- a newer revision (role, password, deactivation) ends the session.
CREATE TABLE IF NOT EXISTS console_sessions (
    session_hash     VARCHAR NOT NULL,
    user_name        VARCHAR NOT NULL,
    kind             VARCHAR NOT NULL,
    happened_at      TIMESTAMPTZ NOT NULL,
    user_changed_at  TIMESTAMPTZ,
    reason           VARCHAR NOT NULL
);
-- signed_in_with: how the session's person signed in (schemas.reviews.SignIn as JSON: local, or
-- directory with issuer and subject), on the start row; NULL in rows written before (local).
ALTER TABLE console_sessions ADD COLUMN IF NOT EXISTS signed_in_with VARCHAR;
-- idp_sid: the directory's session ID (the ID token's sid) of a directory sign-in, which a
-- back-channel logout may name; NULL otherwise.
ALTER TABLE console_sessions ADD COLUMN IF NOT EXISTS idp_sid VARCHAR;

-- Grain: one row per directory person linked to a console account (issuer, subject), written on
-- their first sign-in through the directory (OpenID Connect). Upstream: the console. A person is
-- issuer + subject, never a display name; the account's name is only how the console shows them.
CREATE TABLE IF NOT EXISTS directory_accounts (
    issuer     VARCHAR NOT NULL,
    subject    VARCHAR NOT NULL,
    user_name  VARCHAR NOT NULL,
    linked_at  TIMESTAMPTZ NOT NULL
);

-- Grain: one row per enrolment (or removal) of a user's one-time-code (TOTP) secret (user_name,
-- changed_at); the latest row per user is in force. The secret is what a TOTP code is checked
-- against (it cannot be hashed); the store is owner-only and never shows it after enrolment.
CREATE TABLE IF NOT EXISTS console_totp (
    user_name   VARCHAR NOT NULL,
    secret      VARCHAR,
    active      BOOLEAN NOT NULL,
    changed_at  TIMESTAMPTZ NOT NULL
);
