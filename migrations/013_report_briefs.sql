-- The daily brief and the weekly report are posted once per period, by
-- whichever bot leads when each falls due. A row is claimed (kind and
-- period, such as 'daily' and '2025-01-06') before the message is sent,
-- as bot_notices does for a card, so a failover never posts one twice;
-- a post that fails deletes its claim, so a later pass tries again.

CREATE TABLE report_briefs (
    kind        text NOT NULL CHECK (kind IN ('daily', 'weekly')),
    period      text NOT NULL,
    claimed_at  timestamptz NOT NULL DEFAULT now(),
    room_id     text,
    event_id    text,
    PRIMARY KEY (kind, period)
);
