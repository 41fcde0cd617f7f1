// Package policy decides what Nomos may do and who must agree first. It holds
// the action catalogue, parameter validation, the commands each action
// renders, risk classes, blast radius, plan hashes and approval rules.
//
// The package is pure: it imports only the standard library, does no I/O and
// never reads the clock. Callers pass times, graphs and per-service overrides
// in as data, so every decision here is deterministic and testable.
//
// # Parameters and shell
//
// Every action has a typed parameter struct. [ParseParams] refuses unknown
// and repeated fields and names the offending parameter in its error.
// Identifiers (hostnames, units, packages, storage ids, snapshot names, vmids,
// addresses) are checked against strict grammars, so no shell metacharacter
// ever reaches a command line through one. Free-form shell exists only in
// pct_exec.command, run.command and pct_create.post_install; it is rendered as
// one argument quoted with [ShellQuote], never spliced, and it must not carry
// NUL, control characters other than tab and newline, or invisible and
// bidirectional formatting characters, so the plan card shows exactly what
// runs.
//
// # Risk classes
//
// Classes are ordered: read_only < reversible_low < config_mutation <
// destructive. Each action has a base class (see [Classify]); pct_exec and
// run classify their command with [ClassifyCommand]:
//
//   - read_only only when every command of every pipeline and sequence is on
//     the read-only list (with its arguments checked where they matter, as
//     for curl, systemctl, ip or journalctl), is named literally and from a
//     system directory if by path, and the script has no output redirection
//     to a file, no command or process substitution, no background job, no
//     variable assignment, no control flow, no here-document, no brace
//     expansion and no function definition;
//   - destructive when any command deletes recursively or deletes system
//     directories or guest files (rm -r, rm of /etc/pve/..., find -delete),
//     formats or wipes (mkfs*, wipefs, dd of=, blkdiscard, shred, partition
//     editors), destroys or rolls back (pct/qm destroy, rollback,
//     delsnapshot, zfs destroy/rollback, zpool destroy, lvremove and kin,
//     docker volume and system prune), writes to a block device, powers off
//     or reboots a host (shutdown, poweroff, reboot, halt, systemctl
//     poweroff, init 0, sysrq, ipmitool power off), kills init or every
//     process, or defines a recursive shell function (a fork bomb); and when
//     such a command's subcommand or arguments are only known at run time
//     (rm $X, pct $ACTION 131);
//   - config_mutation for everything else.
//
// Commands run through sudo, env, timeout, xargs, sh -c, eval, pct exec,
// ssh, find -exec and the like are followed and classified in turn. Text the
// tokenizer cannot follow with confidence (an unterminated quote, a case
// statement inside $(...), nesting too deep) is config_mutation at least,
// and destructive if it mentions a destructive command. The read-only rule
// is strict by design; destructive detection is best effort, always erring
// upward.
//
// Per-service overrides ([Override]) raise or lower a class, within bounds:
// they never touch a read_only result, never lower a state change below
// reversible_low and never lower a destructive one.
//
// # Approval
//
// read_only plans approve themselves. reversible_low and config_mutation
// plans accept a reaction, a reply or the typed phrase from an operator.
// destructive plans accept only the typed phrase, "<verb> <target-slug>
// <code>", whose four-character code is derived from the plan hash. The hash
// covers the action, the resolved target, the canonical parameters and the
// rendered steps, so any change makes a new plan that needs a new approval.
package policy
