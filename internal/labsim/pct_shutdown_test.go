package labsim

import "testing"

// TestPctShutdownAsRendered runs pct shutdown exactly as policy renders
// pct_stop, so the actuator's command is known to work against labsim.
func TestPctShutdownAsRendered(t *testing.T) {
	t.Parallel()
	b := setup(t)

	diff(t, "shutdown a running container", result{}, b.run(t, "pve1", "pct shutdown 101 --timeout 60 --forceStop 1"))
	diff(t, "status after shutdown", result{Stdout: "status: stopped\n"}, b.run(t, "pve1", "pct status 101"))
	diff(t, "shutdown a stopped container", result{Stderr: "CT 101 not running\n", Exit: 255},
		b.run(t, "pve1", "pct shutdown 101 --timeout 60 --forceStop 1"))
	diff(t, "shutdown without a timeout value",
		result{Stderr: "Option timeout requires an argument\n400 unable to parse option\npct shutdown <vmid> [OPTIONS]\n", Exit: 255},
		b.run(t, "pve1", "pct shutdown 101 --timeout"))
}
