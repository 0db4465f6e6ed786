-- dim_users: each console user's current name, role, password hash and state (grain: name).
-- Upstream: console_users.
CREATE OR REPLACE VIEW dim_users AS
SELECT * EXCLUDE (rn) FROM (
    SELECT u.*, row_number() OVER (PARTITION BY name ORDER BY changed_at DESC, rowid DESC) AS rn
    FROM console_users u
) WHERE rn = 1;

-- dim_api_tokens: each token's current owner and state (grain: token_hash). Upstream: api_tokens.
CREATE OR REPLACE VIEW dim_api_tokens AS
SELECT * EXCLUDE (rn) FROM (
    SELECT t.*, row_number() OVER (PARTITION BY token_hash ORDER BY changed_at DESC, rowid DESC) AS rn
    FROM api_tokens t
) WHERE rn = 1;

-- reviews_as_of: the review events made up to the instant a reader named with
-- SET VARIABLE dealtrail_reviews_as_of = TIMESTAMPTZ '...' (a report's as-of time, so that the
-- same store and the same as-of give the same report), else every review (grain: review_id).
-- Upstream: reviews.
CREATE OR REPLACE VIEW reviews_as_of AS
SELECT * FROM reviews
WHERE getvariable('dealtrail_reviews_as_of') IS NULL
   OR reviewed_at <= CAST(getvariable('dealtrail_reviews_as_of') AS TIMESTAMPTZ);

-- dim_review_status: each finding's review status as of the reader's time, the projection of its
-- review events (grain: finding_id, every finding of dim_findings, 'unreviewed' without a review).
-- Upstream: dim_findings, reviews_as_of. The status and the disposition in force are
-- rev_status.sql's, spliced in below (inc_findings.sql splices the same file).
CREATE OR REPLACE VIEW dim_review_status AS
WITH rev_events AS (
    SELECT * FROM reviews_as_of
), s AS (
    /*include:rev_status.sql*/
)
SELECT d.finding_id,
       coalesce(s.review_status, 'unreviewed') AS review_status,
       s.last_reviewed_by, s.last_reviewed_at, s.cause, s.disposed_at, s.disposed_by, s.approved_by,
       s.assignee, s.first_reviewed_at,
       coalesce(s.reviews, 0) AS reviews
FROM dim_findings d
LEFT JOIN s USING (finding_id);
