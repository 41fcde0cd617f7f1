-- Scheduled jobs, maintenance windows and standing approvals.
--
-- schedule_runs keeps, per scheduled job, the last slot (the cron time)
-- that a leading bot claimed. A slot is claimed by one conditional UPDATE
-- (slot < the new slot), so two bots can never both run it, and a slot
-- missed while no bot led is found and run once, late, by the next
-- leader. prev_slot lets a run that must be retried give its claim back.
-- The row is written when a job is first seen, so a new schedule never
-- runs a slot from before it existed.
--
-- maintenance_windows hold back alerts and signals for their targets
-- while they are open; the signals held back name the window, so one
-- notice can sum them up when it ends. targets are entity ids, resolved
-- when the window is opened: a name that resolves to more entities later
-- never widens a window.
--
-- standing_approvals let plans on a window's targets, up to a risk class
-- that is never destructive, run without a per-plan approval, once an
-- operator has typed the standing approval's phrase in the room (and a
-- quorum of operators, where configured). The approval a plan runs under
-- names it (approvals.standing_id), and its method is 'standing'.

CREATE TABLE schedule_runs (
    job         text PRIMARY KEY,
    slot        timestamptz NOT NULL,
    prev_slot   timestamptz,
    claimed_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE maintenance_windows (
    id            uuid PRIMARY KEY,
    -- name is the config window's name, or a short code for one opened in
    -- the room.
    name          text NOT NULL,
    target_ids    uuid[] NOT NULL CHECK (cardinality(target_ids) > 0),
    target_slugs  text[] NOT NULL,
    reason        text NOT NULL,
    opened_by     text NOT NULL,
    room_id       text NOT NULL DEFAULT '',
    starts_at     timestamptz NOT NULL,
    ends_at       timestamptz NOT NULL CHECK (ends_at > starts_at),
    -- ended_at is set when the window is over (by time or `end window`)
    -- and its summary is claimed; summary_event_id once it is posted.
    ended_at          timestamptz,
    ended_by          text,
    summary_event_id  text,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX maintenance_windows_open ON maintenance_windows (ends_at) WHERE ended_at IS NULL;
-- A config window opens once per occurrence, whichever bot leads.
CREATE UNIQUE INDEX maintenance_windows_occurrence ON maintenance_windows (name, starts_at);

ALTER TABLE signals ADD COLUMN held_by_window uuid REFERENCES maintenance_windows (id) ON DELETE SET NULL;

CREATE TABLE standing_approvals (
    id            uuid PRIMARY KEY,
    window_id     uuid NOT NULL REFERENCES maintenance_windows (id) ON DELETE CASCADE,
    code          text NOT NULL,
    max_class     text NOT NULL CHECK (max_class IN ('read_only', 'reversible_low', 'config_mutation')),
    -- target_ids are copied from the window when it is asked for.
    target_ids    uuid[] NOT NULL CHECK (cardinality(target_ids) > 0),
    -- schedules may run under it besides operators in the room.
    schedules     text[] NOT NULL DEFAULT '{}',
    requested_by  text NOT NULL,
    approved_by   text[] NOT NULL DEFAULT '{}',
    quorum        int NOT NULL CHECK (quorum >= 1),
    approved_at   timestamptz,
    expires_at    timestamptz NOT NULL,
    revoked_at    timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (window_id)
);

ALTER TABLE approvals DROP CONSTRAINT approvals_method_check;
ALTER TABLE approvals ADD CONSTRAINT approvals_method_check
    CHECK (method IN ('reaction', 'reply', 'phrase', 'auto', 'mcp', 'cli', 'standing'));
ALTER TABLE approvals ADD COLUMN standing_id uuid REFERENCES standing_approvals (id);
ALTER TABLE approvals ADD CONSTRAINT approvals_standing_named CHECK ((method = 'standing') = (standing_id IS NOT NULL));

-- A schedule asks for plans too, as requested_via 'schedule'.
ALTER TABLE executions DROP CONSTRAINT executions_requested_via_check;
ALTER TABLE executions ADD CONSTRAINT executions_requested_via_check
    CHECK (requested_via IN ('chat', 'runbook', 'agent', 'mcp', 'cli', 'schedule'));
