// Package actuator is the hands of Nomos: the only process that reaches into
// the fleet. It consumes signed orders and read-only probes from Redis,
// carries them out over SSH on the Proxmox hosts, and reports progress and
// results back on the results queue.
//
// # Orders
//
// An order runs only if its Ed25519 signature verifies against the pinned
// key, it is addressed to this actuator's name, the local journal has
// never seen its execution id, it has not expired and was not issued for
// longer than [tasks.MaxOrderTTL], and the steps policy derives from its
// action, parameters and target hash to the plan hash the operator
// approved. Anything else is refused and reported with a [tasks.Refusal];
// nothing runs. A refusal of an order that did not verify, or was
// addressed elsewhere, carries no plan hash, so the bot never takes it for
// news of an order it sent. The steps that run are the ones derived here,
// never the ones the order carries.
//
// A probe request runs only if it verifies against the same key, is
// addressed to this actuator and has not expired; anything else is logged
// and dropped, unanswered.
//
// # Inventory
//
// An inventory request (fleet discovery) is held to the same rules and
// served by the probe workers. It runs fixed, read-only commands on the
// host: `pvesh get /cluster/resources --output-format json` (the
// cluster's nodes, the vmids elsewhere and HA states), `pvesh get
// /nodes/<node>/lxc --output-format json` (the node's live view of its
// containers; when it fails, the resources stand in), `pvesm status`
// once, then `pct config <vmid> --current 1` and `pct listsnapshot
// <vmid>` for each container on the requested node, with vmids the host
// listed and the actuator checked. Output is bounded and read by
// internal/pveout, and only values Proxmox allows (numbers, words, host
// names, addresses, tags, snapshot names) are reported; a node the
// cluster does not list, or a host that does not answer, is reported as
// an error with no containers, so nothing is taken for gone.
//
// # Reports
//
// Every progress report, result and probe result is signed with the
// actuator's own report key and names the actuator, so the bot can refuse
// anything on the results queue that the actuator did not send.
//
// # Exactly once, or say so
//
// Before anything is sent to a host, the journal records "started <id>" and
// syncs it to disk; after the result is on the queue it records "finished
// <id> <status>". An id that has ever started is refused as a replay. On
// start-up every id that started but never finished is reported as
// outcome_unknown, because the actuator stopped while it ran.
//
// A command that exits non-zero fails its execution. A command that never
// reached the host (unreachable, refused host key) fails it too, with
// nothing run. A command whose session ends without an exit status after
// it was sent, or that was cut short by a shutdown, leaves the outcome
// unknown: it may have run. A command that outlives its timeout is killed
// and fails the execution.
//
// # Snapshots and provisioning
//
// A config_mutation or destructive step inside a container first takes a
// pct snapshot where it can, and the result names it for a one-step
// pct_rollback. pct_create provisions in named phases: allocate a vmid,
// pick a template, create, start, wait for working DNS inside the container
// (repairing a dead resolver with public ones), install packages with
// retries, then run post_install under set -e. The result lists every phase
// and where it stopped.
//
// # Output
//
// Output streams back as coalesced execution:progress messages carrying the
// last lines and the elapsed time, with a first message as soon as an order
// starts and a heartbeat while it runs. Secrets are redacted (see [Redact])
// from everything the actuator reports.
package actuator
