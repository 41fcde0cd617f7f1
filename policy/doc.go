// Package policy decides what Nomos may do and who must agree first. It holds
// the action catalogue, parameter validation, the commands each action
// renders, risk classes, blast radius, plan hashes and approval rules.
//
// The package is pure: it imports only the standard library and
// mvdan.cc/sh/v3/syntax (a shell parser), does no I/O and never reads the
// clock. Callers pass times, graphs and per-service overrides in as data,
// so every decision here is deterministic and testable.
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
// run classify their command with [ClassifyCommand], which parses it as
// bash (and again as POSIX sh where dash, Debian's sh, reads it
// differently) and walks every command, substitution, here-document,
// function body and nested shell, including what pct exec, lxc-attach and
// qm guest exec run inside a guest:
//
//   - read_only only when every command of every pipeline and sequence is on
//     the read-only list (with its arguments checked where they matter, as
//     for curl, systemctl, the *ctl tools, ip, journalctl, grep, tar or
//     sed), is named literally and from a system directory if by path, and
//     the script has no output redirection to a file, no command, process
//     or arithmetic substitution, no background job, no variable
//     assignment, no control flow, no here-document, no brace expansion,
//     no function definition, no [[ ]], (( )) or let, and nothing that may
//     print a secret;
//   - never read_only: programs that run other programs or take arguments
//     from their input (xargs, env, nice, timeout, nohup, sudo, su, time,
//     command, exec, watch, flock, chroot, find -exec), awk, sed with e, w
//     or -i, tar with a program to run or files to write, pagers and
//     editors, apt with -o or -c, test -v and printf -v (bash evaluates
//     their subscripts), and curl or wget options that read, write or send
//     files;
//   - secrets: reading /etc/pve/priv, /etc/shadow, key files (*.key, *.pem,
//     id_rsa, ssh host keys), .ssh, .env, token.cfg, /proc/*/environ, a
//     raw disk, or a guest backup or disk image (vzdump-*, vm-*-disk-*,
//     *.raw, *.qcow2: cat, strings, zcat, zstdcat, tar -O), tar -O of a
//     secret member (./etc/shadow), file -f or -m, expanding a variable the
//     script did not set, or running
//     printenv, env, set, declare -p, export -p, ps e, docker inspect or
//     pvesh get /access is listed in [Risk].Secrets and is at least
//     config_mutation;
//   - destructive when any command deletes recursively or deletes system
//     directories or guest files (rm -r, rm of /etc/pve/..., find -delete),
//     formats or wipes (mkfs*, wipefs, dd of=, blkdiscard, shred, partition
//     editors), destroys or rolls back (pct/qm destroy, rollback,
//     delsnapshot, zfs destroy/rollback, zpool destroy, lvremove and kin,
//     docker volume and system prune), erases guest volumes or backups
//     (qm/pct set --delete unusedN, qm disk unlink --force, pvesm
//     prune-backups, vzdump unless --remove 0), gives a container a path
//     into the host (pct set or create --mpN, --devN, --hookscript; qm set
//     --hookscript), archives with tar --remove-files or -P, extracts with
//     tar -x into a directory holding a critical file (/, /etc, /var, /usr,
//     /boot, /root, the login directories when no -C names another, or a
//     directory only known at run time), writes to a device or any other
//     critical path (/etc/pve, /var/lib/vz, /var/lib/pve-cluster, /boot,
//     guest disk images, /etc/shadow and the files a host needs to boot or
//     log in, system programs) by any means (a redirection, tee, truncate,
//     cp, mv, install, ln, dd, sed -i, sort -o, apt -o; a copy into a
//     directory counts as writing <dir>/<name>, and a tree copied onto a
//     directory that holds such a file as writing all of it), powers off or
//     reboots a host (shutdown, poweroff, reboot, halt, systemctl poweroff,
//     init 0, sysrq, ipmitool power off), kills init or every process, or
//     defines shell functions that call themselves (a fork bomb); when such
//     a command's subcommand or arguments are only known at run time (rm
//     $X, pct $ACTION 131, echo reboot | xargs systemctl); and, on a host,
//     for any program the classifier cannot read: one with no rule, an
//     interpreter, a script file, a program named at run time or from
//     outside the system directories (in a container those are
//     config_mutation);
//   - config_mutation for everything else.
//
// Text the parser cannot read (an unterminated quote, a syntax error) is
// config_mutation at least, and destructive if it mentions a destructive
// command. The read-only rule is strict by design; destructive detection
// is best effort, always erring upward.
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
