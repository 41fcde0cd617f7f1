-- A second request for the same change (same action, target and
-- parameters) while a plan for it still waits for a decision points at
-- that plan instead of making a new card. request_key identifies the
-- change; it is set on a plan's first step only. The partial unique index
-- makes "one waiting plan per change" a property of the schema: two
-- identical requests at once cannot both insert, whatever the callers do,
-- and the key is free again as soon as the plan is decided, expires or
-- is cancelled.
ALTER TABLE executions ADD COLUMN request_key text;
CREATE UNIQUE INDEX executions_waiting_request_idx ON executions (request_key)
    WHERE state = 'awaiting_approval' AND request_key IS NOT NULL;
