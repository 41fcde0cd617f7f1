// Package bot is Nomos's Matrix front. It syncs the rooms it was invited
// to by an operator, turns commands and runbook phrases into plans, posts
// each plan as a card, takes approvals by reaction, reply or typed phrase,
// edits the card as the execution moves, and escalates with a mention when
// an operator is needed. It never holds an SSH key: approved plans leave as
// signed orders through the executions package.
package bot
