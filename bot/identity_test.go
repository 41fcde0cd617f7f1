package bot_test

import (
	"testing"
)

// TestSharedVMIDInTheRoom: the demo's strong and hubris are standalone
// nodes that both have a CT 100 (Proxmox keeps a vmid unique within a
// cluster only). `show 100` shows both; `reboot 100` asks which one and
// plans nothing; `reboot strong/100` plans the one on strong.
func TestSharedVMIDInTheRoom(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.say(t, b.operator, "show 100", "")
	b.waitFor(t, b.botSays("2 containers have vmid 100", "syncthing (lxc:hubris/100)", "unbound (lxc:strong/100)"))

	b.say(t, b.operator, "reboot 100", "")
	b.waitFor(t, b.botSays(`"100" could mean lxc:hubris/100 or lxc:strong/100`))
	var plans int
	if err := b.storeQuery(t, `SELECT count(*) FROM executions`, &plans); err != nil {
		t.Fatal(err)
	}
	if plans != 0 {
		t.Errorf("an ambiguous reboot planned %d executions, want none", plans)
	}

	b.say(t, b.operator, "reboot strong/100", "")
	b.waitFor(t, b.botSays("lxc:strong/100", "pct reboot 100", "awaiting approval"))
}
