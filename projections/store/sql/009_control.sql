-- Control charts' records (issue 50): what a manager froze and what reviewers did with signals.
-- Upstream: the console and the CLI. Nothing is updated or deleted: a new baseline is a new row
-- beside the earlier ones, and a review of a signal is a new row of its history.

-- Grain: one row per baseline frozen (baseline_id). A baseline is the centre line u_bar
-- (incidents per 1,000 rounds) and Laney's sigma_z of the charts of one kind (dealer or table),
-- slot (shift, day, week) and category (all or one severity), computed from the period
-- [period_start, period_end) and frozen by frozen_by at frozen_at; charts drawn afterwards are
-- judged against the latest one frozen for their kind, slot and category
-- (projections/records/baselines.py).
CREATE TABLE IF NOT EXISTS control_baselines (
    baseline_id   VARCHAR NOT NULL,
    kind          VARCHAR NOT NULL,
    slot          VARCHAR NOT NULL,
    category      VARCHAR NOT NULL,
    period_start  TIMESTAMPTZ NOT NULL,
    period_end    TIMESTAMPTZ NOT NULL,
    u_bar         DOUBLE NOT NULL,
    sigma_z       DOUBLE NOT NULL,
    points        INTEGER NOT NULL,
    frozen_by     VARCHAR NOT NULL,
    frozen_at     TIMESTAMPTZ NOT NULL,
    note          VARCHAR NOT NULL
);

-- Grain: one row per review action on a signal (review_id): acknowledge, note or close, with
-- who and when. The signal's status is the latest status-changing action of its history
-- (projections/records/signal_reviews.py); a note changes no status. signal_id names the chart
-- and the point (projections/models/control.py signal_id).
CREATE TABLE IF NOT EXISTS signal_reviews (
    review_id    VARCHAR NOT NULL,
    signal_id    VARCHAR NOT NULL,
    action       VARCHAR NOT NULL,
    note         VARCHAR NOT NULL,
    user_name    VARCHAR NOT NULL,
    reviewed_at  TIMESTAMPTZ NOT NULL
);
