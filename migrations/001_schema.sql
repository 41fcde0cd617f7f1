-- Schema v1: the fleet graph, its health and metrics, the gated execution
-- lifecycle with its approvals and append-only audit trail, agent sessions,
-- and the knowledge and runbooks the agent and the command grammar read.

-- Every id is a UUIDv7 minted by the application, so ids sort by creation
-- time and can be generated before an insert (an execution id doubles as the
-- asynq TaskID).

CREATE TABLE entities (
    id          uuid PRIMARY KEY,
    slug        text NOT NULL UNIQUE CHECK (slug ~ '^[a-z][a-z0-9_]*:[A-Za-z0-9][A-Za-z0-9._-]*$'),
    type        text NOT NULL CHECK (type ~ '^[a-z][a-z0-9_]*$'),
    name        text NOT NULL,
    attrs       jsonb NOT NULL DEFAULT '{}'::jsonb,
    lifecycle   text NOT NULL DEFAULT 'active'
                CHECK (lifecycle IN ('planned', 'provisioning', 'active', 'deprecated', 'destroyed')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (split_part(slug, ':', 1) = type)
);
CREATE INDEX entities_type_idx ON entities (type);
CREATE INDEX entities_name_idx ON entities (lower(name));

CREATE TABLE relationships (
    id          uuid PRIMARY KEY,
    from_id     uuid NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    to_id       uuid NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    type        text NOT NULL CHECK (type IN ('hosts', 'runs', 'depends_on', 'routes_to')),
    attrs       jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (from_id, to_id, type),
    CHECK (from_id <> to_id)
);
CREATE INDEX relationships_to_idx ON relationships (to_id, type);

-- One row per monitored entity. 'stale' means no observation arrived within
-- three intervals of its fastest check, so old data never looks current.
CREATE TABLE entity_status (
    entity_id      uuid PRIMARY KEY REFERENCES entities (id) ON DELETE CASCADE,
    health         text NOT NULL DEFAULT 'unknown'
                   CHECK (health IN ('healthy', 'degraded', 'unhealthy', 'unknown', 'stale')),
    detail         text NOT NULL DEFAULT '',
    last_check_at  timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- A check is a probe with a bookkeeping entity of its own (check_entity_id)
-- observing a target (target_id). They are distinct columns on purpose:
-- results, status and metrics are written against target_id. Writing them to
-- the probe's own row once left every real entity 'unknown' forever.
CREATE TABLE check_defs (
    id               uuid PRIMARY KEY,
    slug             text NOT NULL UNIQUE,
    check_entity_id  uuid REFERENCES entities (id) ON DELETE SET NULL,
    target_id        uuid NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    kind             text NOT NULL CHECK (kind IN ('http', 'tcp', 'systemd', 'disk', 'pct_status', 'dns')),
    spec             jsonb NOT NULL DEFAULT '{}'::jsonb,
    interval_seconds integer NOT NULL DEFAULT 60 CHECK (interval_seconds >= 5),
    enabled          boolean NOT NULL DEFAULT true,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CHECK (check_entity_id IS NULL OR check_entity_id <> target_id)
);
CREATE INDEX check_defs_target_idx ON check_defs (target_id);

CREATE TABLE metric_samples (
    entity_id  uuid NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    metric     text NOT NULL,
    value      double precision NOT NULL,
    at         timestamptz NOT NULL,
    PRIMARY KEY (entity_id, metric, at)
);
CREATE INDEX metric_samples_metric_at_idx ON metric_samples (metric, at DESC);

CREATE TABLE signals (
    id           uuid PRIMARY KEY,
    entity_id    uuid NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    check_id     uuid REFERENCES check_defs (id) ON DELETE SET NULL,
    kind         text NOT NULL,
    severity     text NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
    state        text NOT NULL DEFAULT 'raised'
                 CHECK (state IN ('raised', 'acknowledged', 'acting', 'resolved', 'muted')),
    summary      text NOT NULL,
    raised_at    timestamptz NOT NULL DEFAULT now(),
    resolved_at  timestamptz,
    CHECK ((state = 'resolved') = (resolved_at IS NOT NULL))
);
-- At most one open signal of a kind per entity: raising it again is a no-op.
CREATE UNIQUE INDEX signals_open_uniq ON signals (entity_id, kind)
    WHERE state IN ('raised', 'acknowledged', 'acting');

-- Policy overrides raise or lower the risk class of actions on one entity.
CREATE TABLE policy_overrides (
    id          uuid PRIMARY KEY,
    entity_id   uuid NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    action      text NOT NULL DEFAULT '*',
    risk_class  text NOT NULL CHECK (risk_class IN ('read_only', 'reversible_low', 'config_mutation', 'destructive')),
    reason      text NOT NULL DEFAULT '',
    UNIQUE (entity_id, action)
);

CREATE TABLE executions (
    id             uuid PRIMARY KEY,
    action         text NOT NULL,
    target_id      uuid REFERENCES entities (id) ON DELETE SET NULL,
    target_slug    text NOT NULL,
    params         jsonb NOT NULL DEFAULT '{}'::jsonb,
    steps          jsonb NOT NULL DEFAULT '[]'::jsonb,
    risk_class     text NOT NULL CHECK (risk_class IN ('read_only', 'reversible_low', 'config_mutation', 'destructive')),
    plan_hash      text NOT NULL,
    plan_code      text NOT NULL,
    state          text NOT NULL CHECK (state IN (
                       'awaiting_approval', 'approved', 'dispatched', 'running',
                       'succeeded', 'failed', 'outcome_unknown', 'reconciled',
                       'denied', 'expired', 'cancelled')),
    requested_by   text NOT NULL,
    requested_via  text NOT NULL CHECK (requested_via IN ('chat', 'runbook', 'agent', 'mcp', 'cli')),
    room_id        text,
    card_event_id  text,
    expires_at     timestamptz NOT NULL,
    result         jsonb,
    error          text,
    progress_tail  text NOT NULL DEFAULT '',
    heartbeat_at   timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX executions_state_idx ON executions (state, updated_at);
CREATE INDEX executions_room_idx ON executions (room_id, created_at DESC);
CREATE UNIQUE INDEX executions_card_idx ON executions (card_event_id) WHERE card_event_id IS NOT NULL;

-- One decision per execution: the primary key makes "first decision wins"
-- a property of the schema, not of the caller.
CREATE TABLE approvals (
    execution_id  uuid PRIMARY KEY REFERENCES executions (id) ON DELETE CASCADE,
    decision      text NOT NULL CHECK (decision IN ('approved', 'denied')),
    decided_by    text NOT NULL,
    method        text NOT NULL CHECK (method IN ('reaction', 'reply', 'phrase', 'auto', 'mcp', 'cli')),
    event_id      text,
    plan_hash     text NOT NULL,
    decided_at    timestamptz NOT NULL DEFAULT now()
);

-- Links an execution to the agent session that asked for it, so its result
-- can re-invoke that session. continued_at is set before the re-invocation
-- runs: a result is never continued twice.
CREATE TABLE plan_executions (
    execution_id  uuid PRIMARY KEY REFERENCES executions (id) ON DELETE CASCADE,
    session_id    uuid NOT NULL,
    chain_depth   integer NOT NULL DEFAULT 0,
    continued_at  timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE audit_log (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT now(),
    actor         text NOT NULL,
    action        text NOT NULL,
    execution_id  uuid,
    entity_id     uuid,
    detail        jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX audit_log_execution_idx ON audit_log (execution_id, id);

-- The audit trail is append-only, and the database enforces it: no role the
-- application uses can rewrite history, whatever bug it has.
CREATE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER audit_log_append_only
    BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_refuse_change();
CREATE TRIGGER audit_log_no_truncate
    BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse_change();

CREATE TABLE agent_sessions (
    id          uuid PRIMARY KEY,
    room_id     text NOT NULL,
    thread_id   text NOT NULL DEFAULT '',
    title       text NOT NULL DEFAULT '',
    summary     text NOT NULL DEFAULT '',
    last_operator_approval_at timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (room_id, thread_id)
);

CREATE TABLE agent_messages (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id    uuid NOT NULL REFERENCES agent_sessions (id) ON DELETE CASCADE,
    role          text NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool', 'note')),
    content       text NOT NULL DEFAULT '',
    tool_calls    jsonb,
    tool_call_id  text,
    blob_sha256   text,
    summarized    boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CHECK (octet_length(content) <= 16384)
);
CREATE INDEX agent_messages_session_idx ON agent_messages (session_id, id);

-- Large tool output is stored once, by content hash, and referenced.
CREATE TABLE agent_blobs (
    sha256      text PRIMARY KEY,
    content     text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- array_to_string is only STABLE in general; for text[] it is immutable, and
-- the generated search column needs that promise.
CREATE FUNCTION nomos_tags_text(text[]) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT array_to_string($1, ' ') $$;

CREATE TABLE knowledge_docs (
    id          uuid PRIMARY KEY,
    slug        text NOT NULL UNIQUE,
    title       text NOT NULL,
    kind        text NOT NULL DEFAULT 'doc' CHECK (kind IN ('doc', 'investigation', 'howto', 'decision')),
    body        text NOT NULL,
    entity_ids  uuid[] NOT NULL DEFAULT '{}',
    tags        text[] NOT NULL DEFAULT '{}',
    search      tsvector GENERATED ALWAYS AS (
                    setweight(to_tsvector('english', coalesce(title, '')), 'A') ||
                    setweight(to_tsvector('english', nomos_tags_text(tags)), 'B') ||
                    setweight(to_tsvector('english', coalesce(body, '')), 'C')
                ) STORED,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX knowledge_docs_search_idx ON knowledge_docs USING gin (search);
CREATE INDEX knowledge_docs_entities_idx ON knowledge_docs USING gin (entity_ids);

-- A runbook is a named, parameterised plan with phrases that trigger it.
-- Its steps are request_execution calls, so they pass the same gate.
CREATE TABLE runbooks (
    id          uuid PRIMARY KEY,
    slug        text NOT NULL UNIQUE,
    title       text NOT NULL,
    description text NOT NULL DEFAULT '',
    triggers    text[] NOT NULL DEFAULT '{}',
    target_type text NOT NULL,
    steps       jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
