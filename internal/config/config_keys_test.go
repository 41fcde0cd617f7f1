package config

import (
	"strings"
	"testing"

	"github.com/nomoshq/nomos/internal/testenv"
)

// TestConfigUnknownKeysAreErrors: a typo in the config, in the file or in
// a NOMOS_ variable, is an error that names the key and the one it most
// likely meant, never a setting silently left at its default (a
// destructive_quorom: 2 left the quorum at 1).
func TestConfigUnknownKeysAreErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		file string
		env  []string
		want []string
	}{
		{"a typo in the file", "approvals:\n  destructive_quorom: 2\n", nil,
			[]string{"unknown key approvals.destructive_quorom; did you mean approvals.destructive_quorum?"}},
		{"a key in the wrong section", "matrix:\n  destructive_quorum: 2\n", nil,
			[]string{"unknown key matrix.destructive_quorum; did you mean approvals.destructive_quorum?"}},
		{"an unknown section", "aproovals:\n  self_approval: false\n", nil,
			[]string{"unknown key aproovals.self_approval; did you mean approvals.self_approval?"}},
		{"nothing near", "llm:\n  temperature_of_the_sun: 9\n", nil, []string{"unknown key llm.temperature_of_the_sun"}},
		{"an item of a list", "mcp:\n  tokens:\n    - name: ci\n      scope: read\n      token_sha256: aa\n      tokn_file: /x\n", nil,
			[]string{"unknown key mcp.tokens[0].tokn_file"}},
		{"a typo in a variable", "", []string{"NOMOS_APPROVALS__DESTRUCTIVE_QUOROM=2"},
			[]string{"environment: unknown key NOMOS_APPROVALS__DESTRUCTIVE_QUOROM (approvals.destructive_quorom); did you mean approvals.destructive_quorum?"}},
		{"single underscores", "", []string{"NOMOS_LLM_MODEL=x"},
			[]string{"NOMOS_LLM_MODEL is not read; a section and its key are joined by two underscores: NOMOS_LLM__MODEL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.file != "" {
				path = testenv.WriteFile(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.file)
			}
			_, err := Load(path, tc.env)
			if err == nil {
				t.Fatalf("loadConfig = nil; want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("loadConfig = %v; want it to say %q", err, w)
				}
			}
		})
	}
	// What is not config is left alone, and what is known loads.
	path := testenv.WriteFile(t, dir, "good.yaml", "approvals:\n  destructive_quorum: 2\nllm:\n  headers:\n    X-Anything: y\n")
	cfg, err := Load(path, []string{"NOMOS_CONFIG=/etc/nomos/nomos.yaml", "NOMOS_TEST_GATE=1", "NOMOS_LLM__MODEL=m"})
	if err != nil {
		t.Fatalf("a config of known keys: %v", err)
	}
	if cfg.Approvals.DestructiveQuorum != 2 || cfg.LLM.Model != "m" {
		t.Errorf("quorum %d, model %q; want 2 and m", cfg.Approvals.DestructiveQuorum, cfg.LLM.Model)
	}
}
