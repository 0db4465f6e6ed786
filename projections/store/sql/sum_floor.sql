-- sum_floor: the floor, one row per table that has events, from the sum_floor summary (the same
-- columns as con_floor.sql, which reads the events and is kept for a store without the summary;
-- tests/integration/test_summaries.py pins the two equal). Grain: table_id. Upstream: sum_floor.
SELECT table_id, game, dealer_id, coalesce(rounds, 0) AS rounds, last_event_at, supervisor_id
FROM sum_floor
WHERE last_event_at IS NOT NULL
ORDER BY game, table_id
