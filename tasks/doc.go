// Package tasks is the wire contract between the bot and the actuator: the
// asynq queue names and task types, the versioned payloads, and the Ed25519
// signing and verification of every message. Both sides import it, so the
// contract lives in one place.
//
// Every payload on a queue is an [Envelope]: the exact body bytes and a
// signature over a fixed prefix, the message type and the body. The bot
// signs orders and probe requests with its order key; the actuator signs
// progress, results and probe results with a key of its own. The type in
// the signed bytes keeps a signature for one kind of message from ever
// verifying as another.
package tasks
