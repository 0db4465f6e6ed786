-- rpt_data_quality: gaps in the trail and rejected input in [$start, $end). Grain: one row.
-- Upstream: fct_detections (DT-sequence-gap), rounds (also those dealt from a deck under a
-- DT-deck-composition suspicion), stg_dead_letters (dated by the occurred_at in
-- the raw input when it can be read; undated ones are counted apart; a row counts its `lines`).
-- A row counts in the period when every time its lines state falls in it (stated_from and
-- stated_to: a dead letter's one time); a group of counted lines whose times fall partly in the
-- period, or that states several tables when the report is of one table, is not attributable
-- to the period: dead_letters_unattributable counts those whose times meet the period.
SELECT
    (SELECT count(*) FROM fct_detections
      WHERE rule_id = 'DT-sequence-gap' AND observed_at >= $start AND observed_at < $end
        AND ($table_id IS NULL OR table_id = $table_id)) AS sequence_gaps,
    (SELECT count(*) FROM rounds r
      WHERE r.completed_at >= $start AND r.completed_at < $end AND ($table_id IS NULL OR r.table_id = $table_id)
        AND EXISTS (SELECT 1 FROM fct_detections d WHERE d.rule_id = 'DT-sequence-gap'
                     AND d.table_id = r.table_id AND d.round_id = r.round_id)) AS unverifiable_rounds,
    (SELECT count(*) FROM rounds r
      WHERE r.completed_at >= $start AND r.completed_at < $end AND ($table_id IS NULL OR r.table_id = $table_id)
        AND coalesce(r.deck_suspect, false)) AS suspect_deck_rounds,
    (SELECT coalesce(sum(lines), 0)::BIGINT FROM stg_dead_letters
      WHERE stated_from >= $start AND stated_to < $end
        AND ($table_id IS NULL OR stated_table_id = $table_id)) AS dead_letters,
    (SELECT coalesce(sum(lines), 0)::BIGINT FROM stg_dead_letters
      WHERE coalesce(NOT (stated_from >= TIMESTAMPTZ '2000-01-01 00:00:00+00'
                          AND stated_to <= TIMESTAMPTZ '2100-12-31 23:59:59.999999+00'),
                     true)) AS dead_letters_undated,  -- no date, or one outside 2000-2100 (rulebook 10.3.4)
    (SELECT coalesce(sum(lines), 0)::BIGINT FROM stg_dead_letters
      WHERE stated_from >= TIMESTAMPTZ '2000-01-01 00:00:00+00' AND stated_to <= TIMESTAMPTZ '2100-12-31 23:59:59.999999+00'
        AND stated_from < $end AND stated_to >= $start
        AND NOT (stated_from >= $start AND stated_to < $end
                 AND ($table_id IS NULL OR coalesce(stated_table_id = $table_id, false)))
        AND ($table_id IS NULL OR stated_table_id = $table_id OR stated_tables > 1)) AS dead_letters_unattributable
