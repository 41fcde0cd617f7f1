// Package migrations embeds the numbered SQL files that build the Nomos
// schema. The store's migration runner applies them in order under an
// advisory lock, so two processes starting together cannot race.
package migrations

import "embed"

// FS holds every migration, named NNN_description.sql.
//
//go:embed *.sql
var FS embed.FS
