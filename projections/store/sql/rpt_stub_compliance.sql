-- rpt_stub_compliance: stub-count compliance per table over the rounds completed in the period.
-- Grain: table_id. Upstream: rounds. longest_run_without_count is the largest number of
-- consecutive non-exempt rounds without a stub count (rulebook decision 1; 5 or more is a breach).
SELECT table_id, game,
       count(*) AS rounds,
       count(*) FILTER (WHERE exempt_from_stub_count) AS exempt_rounds,
       count(*) FILTER (WHERE stub_counted) AS rounds_with_count,
       max(rounds_since_stub_count) AS longest_run_without_count
FROM rounds
WHERE game <> 'PGP' AND completed_at >= $start AND completed_at < $end
  AND ($table_id IS NULL OR table_id = $table_id)
GROUP BY table_id, game
ORDER BY longest_run_without_count DESC, table_id
