-- Grain: one row per change of a console user's profile (name, changed_at): the full name and
-- title a sign-off prints beside the user name (projections/records/users.py). Upstream:
-- dealtrail users profile. Nothing is updated or deleted: a change is a new row, and the latest
-- row per user is the profile in force (dim_user_profiles); a sign-off records the name and title
-- it was made under, so a later change alters no signed report.
CREATE TABLE IF NOT EXISTS user_profiles (
    name        VARCHAR NOT NULL,
    full_name   VARCHAR NOT NULL,
    title       VARCHAR NOT NULL,
    changed_at  TIMESTAMPTZ NOT NULL,
    changed_by  VARCHAR NOT NULL
);

-- dim_user_profiles: each user's profile in force, the latest row (grain: name). Upstream:
-- user_profiles.
CREATE OR REPLACE VIEW dim_user_profiles AS
SELECT name, full_name, title, changed_at, changed_by FROM user_profiles
QUALIFY row_number() OVER (PARTITION BY name ORDER BY changed_at DESC) = 1;
