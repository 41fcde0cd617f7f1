// Package agent is Nomos's LLM loop. It talks to any OpenAI-compatible
// endpoint, reaches the fleet only through the MCP tools (the same
// registry external clients use, through mcp-go's in-process client),
// keeps one session per room or thread with its tool calls and results,
// and is re-invoked when a step it requested finishes, so multi-step work
// goes on without an operator typing "continue".
package agent
