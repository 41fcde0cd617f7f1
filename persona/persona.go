// Package persona embeds SOUL.md, the standing instructions the agent reads
// at the start of every turn: who Nomos is, what it may do, how it works
// step by step through approvals, and how it speaks to operators. The bot
// builds the system prompt from Soul plus a live snapshot of the fleet.
package persona

import _ "embed"

// Soul is the text of SOUL.md.
//
//go:embed SOUL.md
var Soul string
