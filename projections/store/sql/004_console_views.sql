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

-- dim_review_status: each finding's review status, the projection of its review events
-- (grain: finding_id, every finding of dim_findings, 'unreviewed' without a review).
-- Upstream: dim_findings, reviews_as_of. The status is the kind of the latest review event (a
-- proposed disposition: pending_approval, also through later acknowledgements and assignments; a manager's approval: disposed; a rejection: reopened);
-- cause and disposed_at are those of the disposition in force (none once reopened), disposed_by
-- who made it (or proposed it), approved_by the manager who approved it. The same mapping as
-- inc_findings.sql (a test holds them equal).
CREATE OR REPLACE VIEW dim_review_status AS
WITH ranked AS (
    SELECT r.*, row_number() OVER (PARTITION BY finding_id ORDER BY reviewed_at DESC, review_id DESC) AS rn
    FROM reviews_as_of r
), last AS (
    SELECT * FROM ranked WHERE rn = 1
), dsp AS (
    SELECT * FROM reviews_as_of WHERE type IN ('FindingDisposed', 'FindingDispositionProposed')
    QUALIFY row_number() OVER (PARTITION BY finding_id ORDER BY reviewed_at DESC, review_id DESC) = 1
), decision AS (
    SELECT * FROM reviews_as_of
    WHERE type IN ('FindingDisposed', 'FindingDispositionProposed', 'FindingApproved', 'FindingRejected',
                   'FindingReopened')
    QUALIFY row_number() OVER (PARTITION BY finding_id ORDER BY reviewed_at DESC, review_id DESC) = 1
), agg AS (
    SELECT finding_id,
           count(*) AS reviews,
           min(reviewed_at) AS first_reviewed_at,
           arg_max(assignee, reviewed_at) FILTER (WHERE type = 'FindingAssigned') AS assignee
    FROM reviews_as_of GROUP BY finding_id
)
SELECT d.finding_id,
       CASE WHEN decision.type = 'FindingDispositionProposed' THEN 'pending_approval' ELSE CASE last.type
           WHEN 'FindingAcknowledged' THEN 'acknowledged'
           WHEN 'FindingAssigned' THEN 'assigned'
           WHEN 'FindingDisposed' THEN 'disposed'
           WHEN 'FindingReopened' THEN 'reopened'
           WHEN 'FindingApproved' THEN 'disposed'
           WHEN 'FindingRejected' THEN 'reopened'
           ELSE 'unreviewed'
       END END AS review_status,
       last.user_name AS last_reviewed_by,
       last.reviewed_at AS last_reviewed_at,
       CASE WHEN last.type IN ('FindingDisposed', 'FindingApproved') THEN last.cause END AS cause,
       CASE WHEN last.type IN ('FindingDisposed', 'FindingApproved') THEN last.reviewed_at END AS disposed_at,
       CASE WHEN last.type IN ('FindingDisposed', 'FindingApproved') OR decision.type = 'FindingDispositionProposed'
            THEN dsp.user_name END AS disposed_by,
       CASE WHEN last.type = 'FindingApproved' THEN last.user_name END AS approved_by,
       agg.assignee,
       agg.first_reviewed_at,
       coalesce(agg.reviews, 0) AS reviews
FROM dim_findings d
LEFT JOIN last USING (finding_id)
LEFT JOIN dsp USING (finding_id)
LEFT JOIN decision USING (finding_id)
LEFT JOIN agg USING (finding_id);
