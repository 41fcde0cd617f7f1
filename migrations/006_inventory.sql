-- Fleet discovery. The bot asks the actuator for an inventory of each
-- host's containers on a schedule and on `nomos discover`; each request is
-- a row here, so a result is applied only for a run the bot sent, only
-- once, and never over a newer one. What applying a run changed is kept
-- with it until the ops room has heard of it.
--
-- Each container's run state (running, stopped) is what the last
-- inventory saw, kept beside its health: a container's health rolls up
-- its run state, its own checks and the services inside it.

CREATE TABLE inventory_runs (
    id              uuid PRIMARY KEY,
    host_id         uuid NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    -- 'schedule', or who asked with `nomos discover`.
    requested_by    text NOT NULL,
    requested_at    timestamptz NOT NULL,
    sent_at         timestamptz,
    expires_at      timestamptz,
    applied_at      timestamptz,
    -- When the actuator took the inventory; a result older than the
    -- newest applied for the host changes nothing.
    observed_at     timestamptz,
    error           text NOT NULL DEFAULT '',
    -- What applying the run found and changed.
    changes         jsonb,
    -- The ops room is to hear of it (containers new, back, changed or
    -- gone); noticed_at is claimed before the notice is sent.
    announce        boolean NOT NULL DEFAULT false,
    noticed_at      timestamptz,
    CHECK (applied_at IS NULL OR sent_at IS NOT NULL)
);
CREATE INDEX inventory_runs_host_idx ON inventory_runs (host_id, requested_at DESC);
CREATE INDEX inventory_runs_unsent_idx ON inventory_runs (requested_at) WHERE sent_at IS NULL;
CREATE INDEX inventory_runs_notice_idx ON inventory_runs (applied_at)
    WHERE announce AND noticed_at IS NULL;

-- run_state_until is when the run state stops being current: three
-- inventory intervals after it was seen. Past it the container's health
-- is stale, as a check's target is when its checks stop answering.
ALTER TABLE entity_status
    ADD COLUMN run_state       text CHECK (run_state ~ '^[a-z]{1,16}$'),
    ADD COLUMN run_state_at    timestamptz,
    ADD COLUMN run_state_until timestamptz;
