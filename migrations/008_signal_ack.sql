-- Operators acknowledge and mute signals from the room. An acknowledged
-- signal moves to 'acknowledged' and records who did it; a muted one keeps
-- its state and records until when no new alert of its kind on its entity
-- is announced, and who asked. Both are also in the audit log.

ALTER TABLE signals
    ADD COLUMN acknowledged_by text,
    ADD COLUMN acknowledged_at timestamptz,
    ADD COLUMN muted_until     timestamptz,
    ADD COLUMN muted_by        text;

-- The alert loop asks, for each signal to announce, whether its entity
-- and kind are muted.
CREATE INDEX signals_muted_idx ON signals (entity_id, kind) WHERE muted_until IS NOT NULL;
