-- The prober's schedule and each check's latest outcome. A target's health
-- is the worst latest outcome among its enabled checks, so two checks on
-- one service (a unit and a port, say) never overwrite each other, and the
-- open signal of a failing check names that check.

ALTER TABLE check_defs
    ADD COLUMN next_run_at    timestamptz,
    ADD COLUMN last_run_at    timestamptz,
    ADD COLUMN last_health    text CHECK (last_health IN ('healthy', 'degraded', 'unhealthy')),
    ADD COLUMN last_detail    text NOT NULL DEFAULT '',
    ADD COLUMN last_result_at timestamptz;

CREATE INDEX check_defs_due_idx ON check_defs (next_run_at NULLS FIRST) WHERE enabled;

-- A signal worth an operator's attention is announced once in the ops
-- room (alerted_at is claimed before the message is sent), and its
-- resolution is noted once, as a reply to that announcement.
ALTER TABLE signals
    ADD COLUMN alerted_at        timestamptz,
    ADD COLUMN alert_room_id     text,
    ADD COLUMN alert_event_id    text,
    ADD COLUMN resolve_noted_at  timestamptz;
