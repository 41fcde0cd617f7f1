-- Plans of several steps that run in order, and who may approve them.
--
-- A plan of several steps is one row in plans and one execution per step,
-- linked by plan_id and ordered by plan_position (from 1). Each step stays
-- one order for the actuator, signed and dispatched on its own when its
-- turn comes, so the journal and exactly-once are unchanged. The plan's id
-- is the id of its first step's execution: that execution carries the
-- card, and the plan's one decision is its approvals row, bound to
-- plans.plan_hash, the hash over every step. A one-step plan has no row
-- here, as before.
CREATE TABLE plans (
    id          uuid PRIMARY KEY,
    plan_hash   text NOT NULL,
    risk_class  text NOT NULL CHECK (risk_class IN ('read_only', 'reversible_low', 'config_mutation', 'destructive')),
    steps       integer NOT NULL CHECK (steps >= 2),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- waiting: a later step of a plan, until the step before it succeeds.
-- skipped: a later step that never ran because a step before it failed,
-- timed out or ended outcome_unknown.
ALTER TABLE executions DROP CONSTRAINT executions_state_check;
ALTER TABLE executions ADD CONSTRAINT executions_state_check CHECK (state IN (
    'awaiting_approval', 'approved', 'dispatched', 'running',
    'succeeded', 'failed', 'outcome_unknown', 'reconciled',
    'denied', 'expired', 'cancelled', 'waiting', 'skipped'));

-- on_behalf_of names the operator an agent acted for; requested_by is then
-- the agent. With approvals.self_approval off, neither may approve.
ALTER TABLE executions
    ADD COLUMN plan_id        uuid REFERENCES plans (id) ON DELETE CASCADE,
    ADD COLUMN plan_position  integer CHECK (plan_position >= 1),
    ADD COLUMN on_behalf_of   text NOT NULL DEFAULT '',
    ADD CONSTRAINT executions_plan_step_chk CHECK ((plan_id IS NULL) = (plan_position IS NULL));
CREATE UNIQUE INDEX executions_plan_step_idx ON executions (plan_id, plan_position) WHERE plan_id IS NOT NULL;

-- A destructive plan may need the phrase from several operators
-- (approvals.destructive_quorum). Each operator's phrase is one row here;
-- the approvals row, still one per execution, is written when the last
-- one needed arrives, so the first decision still wins: a denial before
-- the quorum is met decides the plan, and nothing decides it twice.
CREATE TABLE approval_votes (
    execution_id  uuid NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    voter         text NOT NULL,
    method        text NOT NULL CHECK (method IN ('reaction', 'reply', 'phrase')),
    event_id      text,
    plan_hash     text NOT NULL,
    voted_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (execution_id, voter)
);
