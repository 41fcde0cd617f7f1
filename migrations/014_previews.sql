-- A plan's preview: what the actuator read, before approval, of what the
-- plan would change (the packages an upgrade installs, the snapshots and
-- backups a destroy leaves behind). One row per execution, written when
-- the bot sends the request (requested_at) and filled once with the
-- actuator's signed answer (preview, applied_at), so a second answer is
-- refused as a replay. Kept apart from executions: a preview never moves
-- an execution's state.

CREATE TABLE execution_previews (
    execution_id  uuid PRIMARY KEY REFERENCES executions (id) ON DELETE CASCADE,
    requested_at  timestamptz NOT NULL,
    preview       jsonb,
    applied_at    timestamptz,
    CHECK ((preview IS NULL) = (applied_at IS NULL))
);
