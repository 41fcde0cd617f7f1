package web

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/store"
)

// AlertmanagerPath is where the bot's HTTP listener takes Alertmanager's
// webhook.
const AlertmanagerPath = "/hooks/alertmanager"

// MinHookTokenLength is the shortest webhook token accepted.
const MinHookTokenLength = 32

// maxHookBody bounds one webhook request; Alertmanager batches are small.
const maxHookBody = 1 << 20

// AlertmanagerHookConfig configures NewAlertmanagerHook.
type AlertmanagerHookConfig struct {
	// Store receives the signals. Required.
	Store *store.Store
	// Token is the bearer token Alertmanager sends (its http_config
	// authorization credentials). Required; at least 32 characters.
	Token  string
	Logger *slog.Logger
	Clock  func() time.Time
}

// AlertmanagerHook turns Prometheus Alertmanager's webhook into signals:
// a firing alert raises one on the entity its labels name, a resolved one
// resolves it. The bot's alert loop announces them like its own checks'.
type AlertmanagerHook struct {
	store     *store.Store
	tokenHash [sha256.Size]byte
	logger    *slog.Logger
	now       func() time.Time
}

// NewAlertmanagerHook validates cfg and builds the handler.
func NewAlertmanagerHook(cfg AlertmanagerHookConfig) (*AlertmanagerHook, error) {
	if cfg.Store == nil {
		return nil, errors.New("alertmanager hook: Store is required")
	}
	if len(cfg.Token) < MinHookTokenLength {
		return nil, fmt.Errorf("alertmanager hook: Token must be at least %d characters", MinHookTokenLength)
	}
	h := &AlertmanagerHook{store: cfg.Store, tokenHash: sha256.Sum256([]byte(cfg.Token)),
		logger: cfg.Logger, now: cfg.Clock}
	if h.logger == nil {
		h.logger = slog.Default()
	}
	if h.now == nil {
		h.now = time.Now
	}
	return h, nil
}

// amPayload is the part of Alertmanager's webhook (version 4) Nomos reads.
type amPayload struct {
	Version string    `json:"version"`
	Alerts  []amAlert `json:"alerts"`
}

type amAlert struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    time.Time         `json:"startsAt"`
	EndsAt      time.Time         `json:"endsAt"`
}

// ServeHTTP takes one batch. An alert whose labels name no entity of the
// fleet is refused with 422 (after the others are applied): Alertmanager
// does not retry a 4xx, and a signal must belong to an entity.
func (h *AlertmanagerHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	got := sha256.Sum256([]byte(token))
	if !ok || subtle.ConstantTimeCompare(got[:], h.tokenHash[:]) != 1 {
		h.logger.Warn("alertmanager webhook refused: bad token", "remote_addr", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="nomos"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	var p amPayload
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxHookBody))
	if err := dec.Decode(&p); err != nil {
		http.Error(w, "want an Alertmanager webhook payload (JSON, version 4)", http.StatusBadRequest)
		return
	}
	if p.Version != "4" {
		http.Error(w, "want an Alertmanager webhook payload of version 4", http.StatusBadRequest)
		return
	}
	var unknown []string
	for _, a := range p.Alerts {
		if err := h.apply(r.Context(), a); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				unknown = append(unknown, alertName(a))
				h.logger.Info("alertmanager alert names no entity", "alertname", alertName(a), "labels", a.Labels)
				continue
			}
			h.logger.Error("apply alertmanager alert", "alertname", alertName(a), "err", err)
			http.Error(w, "could not record the alerts; try again", http.StatusInternalServerError)
			return
		}
	}
	if len(unknown) > 0 {
		http.Error(w, "no entity of the fleet matches these alerts' nomos_target, instance or job labels: "+strings.Join(unknown, ", "),
			http.StatusUnprocessableEntity)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// apply raises or resolves the signal of one alert.
func (h *AlertmanagerHook) apply(ctx context.Context, a amAlert) error {
	e, err := h.entityFor(ctx, a.Labels)
	if err != nil {
		return err
	}
	kind := store.ExternalKindPrefix + shorten(alertName(a), 100)
	now := h.now()
	switch a.Status {
	case "firing":
		at := a.StartsAt
		if at.IsZero() || at.After(now) {
			at = now // a clock ahead of ours must not hold the alert back
		}
		_, _, err := h.store.RaiseSignal(ctx, store.NewSignal{EntityID: e.ID, Kind: kind, Severity: severity(a.Labels["severity"]),
			Summary: shorten(redact.String(summary(a)), 300), At: at})
		return err
	case "resolved":
		at := a.EndsAt
		if at.IsZero() || at.After(now) {
			at = now
		}
		if err := h.store.ResolveSignal(ctx, e.ID, kind, at); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return nil
	}
	return fmt.Errorf("alert %s has status %q: %w", alertName(a), a.Status, store.ErrNotFound)
}

// entityFor maps an alert's labels to one entity: nomos_target (a slug or
// name) first, then instance (an address, or a host name), then job.
func (h *AlertmanagerHook) entityFor(ctx context.Context, labels map[string]string) (store.Entity, error) {
	if ref := labels["nomos_target"]; ref != "" {
		return h.one(ctx, ref)
	}
	if inst := labels["instance"]; inst != "" {
		host, portText, err := net.SplitHostPort(inst)
		if err != nil {
			host, portText = inst, ""
		}
		port, _ := strconv.Atoi(portText)
		if net.ParseIP(host) != nil {
			if e, err := h.store.EntityByAddress(ctx, host, port); err == nil || !errors.Is(err, store.ErrNotFound) {
				return e, err
			}
		} else if e, err := h.one(ctx, host); err == nil || !errors.Is(err, store.ErrNotFound) {
			return e, err
		}
	}
	if job := labels["job"]; job != "" {
		return h.one(ctx, job)
	}
	return store.Entity{}, fmt.Errorf("alert labels name no entity: %w", store.ErrNotFound)
}

// one resolves ref to exactly one entity; none or several is ErrNotFound.
func (h *AlertmanagerHook) one(ctx context.Context, ref string) (store.Entity, error) {
	es, err := h.store.ResolveTargets(ctx, ref)
	if err != nil {
		return store.Entity{}, err
	}
	if len(es) != 1 {
		return store.Entity{}, fmt.Errorf("%q matches %d entities: %w", ref, len(es), store.ErrNotFound)
	}
	return es[0], nil
}

func alertName(a amAlert) string {
	return cmp.Or(a.Labels["alertname"], "unnamed")
}

func summary(a amAlert) string {
	return cmp.Or(a.Annotations["summary"], a.Annotations["description"], alertName(a))
}

// severity maps the usual Prometheus severity labels to a signal's.
func severity(label string) string {
	switch strings.ToLower(label) {
	case "critical", "page", "error":
		return "critical"
	case "info", "none":
		return "info"
	}
	return "warning"
}
