-- A decision the bot was handling when it died must be handled again when
-- the sync that carried it replays. bot_handled_events records when an
-- event was claimed; done_at, when its handling ended. An event claimed
-- and never done is claimed again on replay (its decision is idempotent:
-- the approvals row is first-decision-wins). Every event handled so far
-- counts as done.

ALTER TABLE bot_handled_events ADD COLUMN done_at timestamptz;
UPDATE bot_handled_events SET done_at = handled_at;
