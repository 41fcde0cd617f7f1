-- The Matrix bot's own bookkeeping. mautrix saves the sync token before
-- handlers run, so a restart can see an event again: handled_events makes
-- handling idempotent by event id. bot_notices records one-off notices
-- (an expiry warning, an escalation) so they are sent once per execution.

CREATE TABLE bot_handled_events (
    event_id    text PRIMARY KEY,
    room_id     text NOT NULL,
    handled_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE bot_state (
    key    text PRIMARY KEY,
    value  text NOT NULL
);

CREATE TABLE bot_notices (
    execution_id  uuid NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    kind          text NOT NULL,
    event_id      text,
    sent_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (execution_id, kind)
);
