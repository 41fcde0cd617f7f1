//go:build nomosdev

package main

// The dev stack's state file, which `nomos dev` writes and `nomos chat`
// reads, both in the development build.

// devState is .nomos-dev/dev.json: what `nomos chat`, the tests and an
// operator need to reach the local stack. A second run reads it back and
// reuses the accounts and the room.
type devState struct {
	// StackID is also in a comment on the dev database: when the two
	// differ, the database belongs to another (or a deleted) directory.
	StackID       string `json:"stack_id"`
	HomeserverURL string `json:"homeserver_url"`
	RoomID        string `json:"room_id"`
	// Encrypted says the ops room is end-to-end encrypted (`nomos dev
	// -e2ee`), with verified devices required there; otherwise it is in
	// the clear, for clients that speak plain Matrix, and they are not.
	Encrypted   bool       `json:"encrypted,omitempty"`
	BotUserID   string     `json:"bot_user_id"`
	Bot         devAccount `json:"bot"`
	Operator    devAccount `json:"operator"`
	Guest       devAccount `json:"guest"`
	StatusURL   string     `json:"status_url"`
	MCPURL      string     `json:"mcp_url"`
	MCPToken    string     `json:"mcp_token"`
	LabsimLog   string     `json:"labsim_log"`
	DatabaseURL string     `json:"database_url"`
	RedisURL    string     `json:"redis_url"`
	// Config is the nomos.yaml the roles run with.
	Config string `json:"config"`
}

type devAccount struct {
	UserID   string `json:"user_id"`
	Password string `json:"password"`
}
