-- rpt_control_given: a control chart over points the caller registers as `given_points` (the
-- columns of rpt_control_points.sql: subject_id, slot_start, slot_start_utc, rounds, voiding,
-- procedural, integrity), judged by the same rules and formulas as the store's charts
-- (rpt_control_judge.sql): a group's properties by gaming day or week (issue 51).
WITH points AS (
    SELECT subject_id, slot_start, slot_start_utc, rounds, voiding, procedural, integrity FROM given_points
), /*include:rpt_control_judge.sql*/
