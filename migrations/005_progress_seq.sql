-- Progress reports from the actuator are signed and numbered from 1 per
-- execution. The highest number applied is kept here, so a report copied
-- and put back on the queue (a replay) is refused instead of refreshing
-- the heartbeat of an execution that went silent.
ALTER TABLE executions ADD COLUMN progress_seq bigint NOT NULL DEFAULT 0;
