package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/nomoshq/nomos/internal/supervisor"
)

// runSupervised runs a long-lived role's supervisor and tells systemd
// about it (sd_notify, for Type=notify units): READY=1 once every service
// has started, WATCHDOG=1 every half WatchdogSec= while every service is
// healthy, STATUS= with what is not, and STOPPING=1 when it begins to stop.
// Outside systemd (no NOTIFY_SOCKET) it only runs the supervisor.
func runSupervised(ctx context.Context, logger *slog.Logger, sup *supervisor.Supervisor) error {
	n := sdNotifier{logger: logger}
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		logger.Warn("systemd watchdog settings unreadable; not pinging it", "err", err)
	}
	if interval > 0 {
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		go n.watchdog(wctx, sup, interval/2)
	}
	return sup.Notify(n).Run(ctx)
}

// sdNotifier sends the supervisor's lifecycle to systemd.
type sdNotifier struct{ logger *slog.Logger }

var _ supervisor.Notifier = sdNotifier{}

func (n sdNotifier) Ready()    { n.send(daemon.SdNotifyReady + "\nSTATUS=running") }
func (n sdNotifier) Stopping() { n.send(daemon.SdNotifyStopping + "\nSTATUS=stopping") }

func (n sdNotifier) send(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		n.logger.Warn("sd_notify failed", "state", state, "err", err)
	}
}

// watchdog pings systemd's watchdog every period while the supervisor says
// every service is healthy. An unhealthy service stops the pings, so
// systemd restarts the role once WatchdogSec= passes without one; STATUS=
// says why meanwhile (systemctl status shows it).
func (n sdNotifier) watchdog(ctx context.Context, sup *supervisor.Supervisor, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, period)
		err := sup.Healthy(hctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			n.logger.Warn("unhealthy: not pinging the systemd watchdog", "err", err)
			n.send("STATUS=unhealthy: " + strings.ReplaceAll(err.Error(), "\n", "; "))
			continue
		}
		n.send(fmt.Sprintf("%s\nSTATUS=running", daemon.SdNotifyWatchdog))
	}
}
