package policy

// LockMeaning says in a few words what a Proxmox lock means.
func LockMeaning(lock string) string {
	switch lock {
	case "backup":
		return "a backup is running"
	case "snapshot", "snapshot-delete":
		return "a snapshot is being taken or deleted"
	case "rollback":
		return "a rollback is running"
	case "migrate":
		return "it is being migrated"
	case "create":
		return "it is being created"
	case "destroyed":
		return "it is being destroyed"
	case "mounted":
		return "its disks are mounted on the node (pct mount)"
	}
	return "another operation holds it"
}
