// Package store is the only place Nomos speaks SQL. It owns the pgx pool,
// applies the embedded migrations and the seed files (internal/fleetseed
// reads them), and returns domain types rather than driver rows. Driver
// errors are translated at this boundary: a missing row is ErrNotFound.
package store
