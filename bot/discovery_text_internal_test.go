package bot

import (
	"testing"

	"github.com/nomoshq/nomos/store"
)

func TestDiscoveryText(t *testing.T) {
	t.Parallel()
	ref := func(vmid int, name string) store.ContainerRef { return store.ContainerRef{VMID: vmid, Name: name} }
	for _, tc := range []struct {
		c    store.InventoryChanges
		want string
	}{
		{store.InventoryChanges{Host: "strong", New: []store.ContainerRef{ref(150, "newbox")}},
			"🔎 On strong: discovered a new container: 150 newbox. Say `list containers` to see the fleet."},
		{store.InventoryChanges{Host: "strong", New: []store.ContainerRef{ref(150, "newbox"), ref(151, "web")}, Gone: []store.ContainerRef{ref(131, "teddycloud")}},
			"🔎 On strong: discovered 2 new containers: 150 newbox and 151 web; 131 teddycloud is gone. Say `list containers` to see the fleet."},
		{store.InventoryChanges{Host: "hubris", Back: []store.ContainerRef{ref(131, "teddycloud")},
			Changed: []store.ContainerChange{{ContainerRef: ref(150, "newbox"), Keys: []string{"ip", "memory_mb"}}},
			Gone:    []store.ContainerRef{ref(110, "a"), ref(111, "b"), ref(112, "c")}},
			"🔎 On hubris: 131 teddycloud is back; changed: 150 newbox (ip, memory); 110 a, 111 b, 112 c are gone. Say `list containers` to see the fleet."},
	} {
		plain, htm := discoveryText(tc.c)
		if plain != tc.want {
			t.Errorf("discoveryText(%+v) =\n%s\nwant\n%s", tc.c, plain, tc.want)
		}
		checkHTML(t, htm)
	}
	var many []store.ContainerRef
	for i := range 25 {
		many = append(many, ref(200+i, "x"))
	}
	if plain, _ := discoveryText(store.InventoryChanges{Host: "big", Gone: many}); len(plain) > 300 {
		t.Errorf("25 gone containers make a notice of %d bytes:\n%s", len(plain), plain)
	}
}
