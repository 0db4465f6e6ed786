-- Grain: one row per name an admin gave the casino property in the console (set_at); the latest
-- row is in force (projections/records/property.py). Upstream: the console. Nothing is updated or
-- deleted: a new name is a new row, and the earlier ones stay as the record of what was shown.
CREATE TABLE IF NOT EXISTS property_names (
    name    VARCHAR NOT NULL,
    set_at  TIMESTAMPTZ NOT NULL,
    set_by  VARCHAR NOT NULL
);
