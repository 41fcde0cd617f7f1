package redact

import (
	"strings"
	"testing"
)

var cases = []struct {
	name, in, want string
}{
	{"nothing secret", "Setting up nginx (1.22.1-9+deb12u1) ...\nactive\n", "Setting up nginx (1.22.1-9+deb12u1) ...\nactive\n"},
	{"password=", "mysql -u root password=hunter2 -h db", "mysql -u root password=[REDACTED] -h db"},
	{"PASSWORD: with more after", "PASSWORD: hunter2 and more", "PASSWORD: [REDACTED] and more"},
	{"PASSWORD env", "export DB_PASSWORD=s3cr3t\n", "export DB_PASSWORD=[REDACTED]\n"},
	{"token=", "curl https://x/api?token=abc123&page=2", "curl https://x/api?token=[REDACTED]&page=2"},
	{"quoted value with a space", "GITHUB_TOKEN='ghp x'", "GITHUB_TOKEN=[REDACTED]"},
	{"secret:", "client_secret: 9f8e7d6c5b4a", "client_secret: [REDACTED]"},
	{"secret with spaces around =", "client_secret = s3cr3t", "client_secret = [REDACTED]"},
	{"passphrase", "passphrase=correct-horse", "passphrase=[REDACTED]"},
	{"api_key quoted", `api_key="sk-live-0123456789"`, `api_key=[REDACTED]`},
	{"apikey json", `{"apiKey": "sk-0123456789", "user": "bob"}`, `{"apiKey": [REDACTED], "user": "bob"}`},
	{"password flag", "mysqladmin --password hunter2 status", "mysqladmin --password [REDACTED] status"},
	{"token flag", "gh auth login --token=ghp_abcdef0123456789", "gh auth login --token=[REDACTED]"},
	{"token flag with a space", "app --token abc.def", "app --token [REDACTED]"},
	{"bearer header", "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig' http://x/", "curl -H 'Authorization: Bearer [REDACTED]' http://x/"},
	{"basic header", "Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic [REDACTED]"},
	{"bearer alone", "using bearer abcdefgh12345678 for the call", "using bearer [REDACTED] for the call"},
	{"short words after bearer", "the bearer of bad news", "the bearer of bad news"},
	{"url credentials", "git clone https://alice:pa55w0rd@git.example.org/repo.git", "git clone https://alice:[REDACTED]@git.example.org/repo.git"},
	{"url with a password and no user", "redis://:hunter2@10.0.0.5:6379/0", "redis://:[REDACTED]@10.0.0.5:6379/0"},
	{"url with a port", "http://10.0.0.5:8096/health", "http://10.0.0.5:8096/health"},
	{"url without credentials", "http://deb.debian.org/debian bookworm InRelease", "http://deb.debian.org/debian bookworm InRelease"},
	{"github token", "use ghp_abcdefghijklmnopqrstuvwxyz0123 now", "use [REDACTED] now"},
	{"openrouter key", "key sk-or-v1-0123456789abcdef0123456789", "key [REDACTED]"},
	{"aws key id", "AKIAABCDEFGHIJKLMNOP", "[REDACTED]"},
	{"matrix token", "access token syt_bm9tb3M_abcdefghij_0123", "access token [REDACTED]"},
	{"pem block", "before\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nAAAAAAAAAAEAAAAzAAAAC3NzaC1lZDI1NTE5AAAAI\n-----END OPENSSH PRIVATE KEY-----\nafter\n",
		"before\n[REDACTED PRIVATE KEY]\nafter\n"},
	{"pem start only", "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\nMIIEpAIBAAKCAQEA8", "key:\n[REDACTED PRIVATE KEY]"},
	{"pem end only", "MIIEpAIBAAKCAQEA7\nMIIEpAIBAAKCAQEA8\n-----END PRIVATE KEY-----\nok", "[REDACTED PRIVATE KEY]\nok"},
	{"public key stays", "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n-----END PUBLIC KEY-----", "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n-----END PUBLIC KEY-----"},
	{"package names stay", "Setting up libsecret-1-0 (0.20.5-3) ...", "Setting up libsecret-1-0 (0.20.5-3) ..."},
}

func TestString(t *testing.T) {
	t.Parallel()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := String(tc.in); got != tc.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

func FuzzString(f *testing.F) {
	for _, tc := range cases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once := String(s)
		if twice := String(once); twice != once {
			t.Errorf("String is not idempotent:\n in: %q\n 1x: %q\n 2x: %q", s, once, twice)
		}
		for _, secret := range []string{"password=hunter2", "Bearer abcdefgh12345678"} {
			if strings.Contains(once, secret) {
				t.Errorf("%q survived in %q", secret, once)
			}
		}
	})
}
