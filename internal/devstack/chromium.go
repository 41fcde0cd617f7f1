package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
)

// chromiumNames are the executables Debian and other distributions give
// Chromium, in the order they are tried.
var chromiumNames = []string{"chromium", "chromium-browser"}

// ErrNoChromium is returned by ChromiumPath when no Chromium is installed.
var ErrNoChromium = errors.New("chromium is not installed: run `make prepare`, which installs Debian's chromium package")

// ChromiumPath returns the path of an installed Chromium, or ErrNoChromium.
// The browser tests use it and fail, rather than skip, when it is missing.
func ChromiumPath() (string, error) {
	for _, name := range chromiumNames {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoChromium
}

// EnsureChromium returns the path of Chromium, installing Debian's chromium
// package with apt when it is missing. The status page's browser tests and
// `make screenshots` drive it headless; nothing else needs it.
func EnsureChromium(ctx context.Context, logger *slog.Logger) (string, error) {
	if p, err := ChromiumPath(); err == nil {
		return p, nil
	}
	if logger == nil {
		logger = slog.Default()
	}
	logger.Info("installing chromium with apt, for the status page's browser tests")
	// A font, so screenshots show text rather than empty boxes.
	if err := aptInstall(ctx, "chromium", "fonts-dejavu-core"); err != nil {
		return "", err
	}
	p, err := ChromiumPath()
	if err != nil {
		return "", fmt.Errorf("chromium not found after install: %w", err)
	}
	return p, nil
}
