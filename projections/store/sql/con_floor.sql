-- con_floor: the floor, one row per table that has events: game, the dealer of its latest round,
-- rounds dealt and the last event. Grain: table_id. Upstream: events, rounds. Its incident counts
-- come from the incidents read model (projections/models/incidents.py); its devices' state from the
-- engine's own stored state (projections/models/device_state.py, rulebook 10.3.1: not recomputed here).
WITH t AS (
    SELECT table_id, any_value(game) AS game, max(occurred_at) AS last_event_at FROM events GROUP BY table_id
), r AS (
    SELECT table_id, count(*) AS rounds, arg_max(dealer_id, completed_at) AS dealer_id,
           max(completed_at) AS last_round_at
    FROM rounds GROUP BY table_id
)
SELECT t.table_id, t.game, r.dealer_id, coalesce(r.rounds, 0) AS rounds, t.last_event_at
FROM t LEFT JOIN r USING (table_id)
ORDER BY t.game, t.table_id
