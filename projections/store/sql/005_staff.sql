-- The staff roster: who a dealer or supervisor ID is (schemas/staff.py). Written by the store's
-- one writer (dealtrail staff import, the console's admin page, or the projector from the staff
-- topic); append-only.

-- Grain: one row per roster event (change_id): a full revision of one person's entry.
-- Upstream: dealtrail staff import, the console's admin page, or the staff topic. Nothing is
-- updated or deleted.
CREATE TABLE IF NOT EXISTS staff_changes (
    change_id    VARCHAR NOT NULL,
    staff_id     VARCHAR NOT NULL,
    name         VARCHAR NOT NULL,
    role         VARCHAR NOT NULL,
    active       BOOLEAN NOT NULL,
    change       VARCHAR NOT NULL,
    recorded_by  VARCHAR NOT NULL,
    recorded_at  TIMESTAMPTZ NOT NULL,
    source       VARCHAR NOT NULL,
    payload      JSON NOT NULL
);

-- dim_staff: the roster in force, each ID's latest revision (grain: staff_id). Upstream:
-- staff_changes.
CREATE OR REPLACE VIEW dim_staff AS
SELECT * EXCLUDE (rn) FROM (
    SELECT s.*, row_number() OVER (PARTITION BY staff_id ORDER BY recorded_at DESC, change_id DESC) AS rn
    FROM staff_changes s
) WHERE rn = 1;
