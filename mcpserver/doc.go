// Package mcpserver is Nomos's one registry of tools, served to the bot's
// own agent through mcp-go's in-process client and to external MCP clients
// over streamable HTTP (behind a bearer token) and stdio. Every tool reads
// the store, except request_execution, which goes through the same gate as
// a chat command, and the live probes (get_lxc_state, tail_log, http_get). Tool
// results are compact text sized for a model: one call answers a
// fleet-wide question, and no result grows past a fixed cap.
package mcpserver
