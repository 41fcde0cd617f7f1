-- Why a step was asked for, in the asker's words: an agent or an MCP
-- client must give one, and the plan card shows it to the operator who
-- decides. Empty for an operator's own chat command.
ALTER TABLE executions ADD COLUMN reason text NOT NULL DEFAULT '';
