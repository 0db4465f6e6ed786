-- con_findings: the console's findings list, one row per finding detected in [$start, $end)
-- with its latest status, review status, due time and late flag, and the dealer of its round.
-- Grain: finding_id. Upstream: fct_detections, dim_review_status, rounds.
-- Review due: $due_voiding / $due_integrity / $due_procedural hours after detection (settings);
-- late: disposed after that, or not disposed by $as_of.
WITH f AS (
    SELECT d.finding_id, d.rule_id, d.citation, d.game, d.severity, d.provisional, d.table_id, d.round_id,
           d.current_status AS status, d.message, d.required_remedy, d.observed_at AS detected_at,
           d.evidence_event_ids, d.current_remedy_event_ids AS remedy_event_ids,
           d.current_remedy_delay_seconds AS remedy_delay_seconds, d.current_late AS remedied_late,
           r.dealer_id,
           s.review_status, s.last_reviewed_by, s.last_reviewed_at, s.cause, s.disposed_at, s.assignee,
           s.reviews,
           d.observed_at + to_microseconds(CAST(3600e6 * CASE d.severity
               WHEN 'voiding' THEN $due_voiding WHEN 'integrity' THEN $due_integrity
               ELSE $due_procedural END AS BIGINT)) AS review_due_at
    FROM fct_detections d
    JOIN dim_review_status s USING (finding_id)
    LEFT JOIN rounds r ON r.table_id = d.table_id AND r.round_id = d.round_id
    WHERE d.observed_at >= $start AND d.observed_at < $end
      AND ($finding_id IS NULL OR d.finding_id = $finding_id)
)
SELECT *, coalesce(disposed_at, $as_of) > review_due_at AS review_late
FROM f
WHERE ($game IS NULL OR game = $game)
  AND ($table_id IS NULL OR table_id = $table_id)
  AND ($dealer IS NULL OR dealer_id = $dealer)
  AND ($rule IS NULL OR rule_id = $rule)
  AND ($severity IS NULL OR severity = $severity)
  AND ($status IS NULL OR status = $status)
  AND ($review_status IS NULL OR review_status = $review_status)
