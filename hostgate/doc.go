// Package hostgate is `nomos gate`, the forced command on each Proxmox host
// that limits the actuator's SSH key to the commands Nomos sends.
//
// sshd runs the gate instead of whatever the client asked for, with the
// request in SSH_ORIGINAL_COMMAND. The gate parses it as bash would (one
// simple command, words made only of literal text and quotes: no variable,
// substitution, glob, brace or tilde expansion, redirection, pipe or list),
// checks the resulting argv against an allowlist of the command forms the
// actuator renders, and runs the program directly with that argv, so no
// shell ever sees the raw string. Anything else is refused with one line on
// stderr, exit status 126 and a line in the host's journal.
//
// The allowlist, [Allowed], is built from policy's validators: pct's
// subcommands with the options Nomos uses, pvesh get of a few read-only
// paths, pveam and pvesm listings, the probes, tail_log's journalctl
// reads, node_reboot's shutdown -r +1 and apt_upgrade's fixed apt forms on
// the node, and inside a container (pct exec VMID -- …) the guest commands
// the actions and probes run, including sh -c with an approved script. A shell on the host itself, which
// only the run action sends, is refused unless the rules file sets
// host_shell: true, and a privileged container unless it sets
// privileged_containers: true ([LoadRules]).
//
// [Install] is `nomos gate -install`: it puts the forced-command line for
// the actuator's key into root's authorized_keys once, through the symlink
// Proxmox VE makes to the cluster-wide /etc/pve/priv/authorized_keys, and
// reports the cluster's nodes that lack the binary.
//
// The package reaches nothing on the network, and the gate reads no
// configuration beyond that one optional file.
package hostgate
