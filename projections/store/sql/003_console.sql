-- The compliance console's tables: reviews (append-only review events), users and API tokens
-- (append-only revisions; the latest row per key is in force). Written by the store's one
-- writer (the console in embedded mode, or the projector).

-- Grain: one row per review event (review_id). Upstream: the console (or the reviews topic).
-- Review events are immutable facts (schemas/reviews.py); a finding's review status is the
-- projection dim_review_status below. Nothing is updated or deleted.
CREATE TABLE IF NOT EXISTS reviews (
    review_id          VARCHAR NOT NULL,
    finding_id         VARCHAR NOT NULL,
    type               VARCHAR NOT NULL,
    user_name          VARCHAR NOT NULL,
    reviewed_at        TIMESTAMPTZ NOT NULL,
    assignee           VARCHAR,
    cause              VARCHAR,
    corrective_action  VARCHAR,
    note               VARCHAR NOT NULL,
    payload            JSON NOT NULL
);

-- Grain: one row per change of a console user (name, changed_at); the latest row per name is in
-- force (dim_users). password_hash is an argon2id hash, never the password.
CREATE TABLE IF NOT EXISTS console_users (
    name           VARCHAR NOT NULL,
    role           VARCHAR NOT NULL,
    password_hash  VARCHAR,
    active         BOOLEAN NOT NULL,
    changed_at     TIMESTAMPTZ NOT NULL,
    changed_by     VARCHAR NOT NULL
);
-- must_change: the password is a one-time password an admin's reset gave (issue 48): it only
-- sets a new password; NULL in rows written before it was recorded (read as false).
ALTER TABLE console_users ADD COLUMN IF NOT EXISTS must_change BOOLEAN;

-- Grain: one row per change of an API token (token_hash, changed_at); the latest row per token
-- is in force. token_hash is the SHA-256 of the token (a random 256-bit secret), never the token.
-- changed_by: who wrote the row (the first row's is the token's issuer: its user, who made it
-- for themselves); NULL in rows written before it was recorded (the access log names the issuer).
CREATE TABLE IF NOT EXISTS api_tokens (
    token_hash  VARCHAR NOT NULL,
    user_name   VARCHAR NOT NULL,
    active      BOOLEAN NOT NULL,
    changed_at  TIMESTAMPTZ NOT NULL
);
ALTER TABLE api_tokens ADD COLUMN IF NOT EXISTS changed_by VARCHAR;
