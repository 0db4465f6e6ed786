-- Grain: one row per public key the property has signed with (valid_from); a key is valid from
-- its valid_from until the next row's (projections/records/signing_keys.py). Upstream: dealtrail keys
-- create / rotate. Nothing is updated or deleted: a rotation is a new row, and the earlier keys
-- stay, so every earlier signature can be checked with the key that was valid when it was made.
-- Only public keys: the private key lives in the file DEALTRAIL_SIGNING__KEY_FILE names.
CREATE TABLE IF NOT EXISTS signing_keys (
    key_id          VARCHAR NOT NULL,
    public_key_pem  VARCHAR NOT NULL,
    valid_from      TIMESTAMPTZ NOT NULL,
    recorded_by     VARCHAR NOT NULL
);
