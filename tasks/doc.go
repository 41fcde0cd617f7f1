// Package tasks is the wire contract between the bot and the actuator: the
// asynq queue names and task types, the versioned payloads, and the Ed25519
// signing and verification of orders. Both sides import it, so the contract
// lives in one place.
package tasks
