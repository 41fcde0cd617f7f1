// Package redact removes secrets from text before Nomos posts or stores
// it: command output on its way out of the actuator, and anything the bot
// puts in a room. One rule set serves both, so what is hidden does not
// depend on which side saw the text first.
package redact

import "regexp"

// Marker replaces every secret String finds.
const Marker = "[REDACTED]"

const keyMarker = "[REDACTED PRIVATE KEY]"

// A rule names the kind of secret it finds, for the refusal of a plan whose
// own text carries one (see Find).
type rule struct {
	kind string
	re   *regexp.Regexp
	repl string
}

var rules = []rule{
	// A whole PEM private key block, or its start when the text ends first.
	{"a private key", regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)`), keyMarker},
	// The end of a block whose start was cut off, as in an output tail.
	{"a private key", regexp.MustCompile(`(?m)(?:^[A-Za-z0-9+/=]+\r?\n)*-----END [A-Z0-9 ]*PRIVATE KEY-----`), keyMarker},
	// A PEM block that was base64-encoded again ("-----BEGIN" is LS0tLS1CRUdJTi).
	{"a base64-encoded key or certificate", regexp.MustCompile(`LS0tLS1CRUdJT[A-Za-z0-9+/]*={0,2}`), Marker},
	// Slack incoming webhooks: the URL is the credential.
	{"a Slack webhook URL", regexp.MustCompile(`(https://hooks\.slack\.com/)(?:services|workflows|triggers)/[A-Za-z0-9/_-]+`), "${1}" + Marker},
	// Credentials in a URL: scheme://user:password@host, user optional.
	{"a password in a URL", regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+@`), "${1}" + Marker + "@"},
	// Authorization: Basic|Token|Digest <credentials>.
	{"an Authorization header", regexp.MustCompile(`(?i)(\bauthorization["']?[ \t]*[:=][ \t]*["']?(?:basic|token|digest)[ \t]+)[^\s"',;]+`), "${1}" + Marker},
	// Proxmox API tokens in a header: PVEAPIToken=user@realm!id=<uuid>.
	{"a Proxmox API token", regexp.MustCompile(`(?i)(PVEAPIToken[ \t]*=[ \t]*[^=\s]+=)[0-9a-f-]{36}`), "${1}" + Marker},
	// Proxmox's token.cfg: "user@realm!tokenid <uuid>" per line.
	{"a Proxmox API token", regexp.MustCompile(`(?m)^([ \t]*[^\s@]+@[^\s!]+![A-Za-z0-9._-]+[ \t]+)[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`), "${1}" + Marker},
	// Cookies, sent or set: the whole value is the session.
	{"a cookie", regexp.MustCompile(`(?im)(\b(?:set-)?cookie[ \t]*:[ \t]*)[^\r\n"']+`), "${1}" + Marker},
	// Bearer tokens, in a header or anywhere else.
	{"a bearer token", regexp.MustCompile(`(?i)(\bbearer[ \t]+)[A-Za-z0-9\-._~+/]{8,}=*`), "${1}" + Marker},
	// --password value and --token=value style flags.
	{"a password or token flag", regexp.MustCompile(`(?i)(--?(?:password|passwd|token|secret|api[-_]?key|access[-_]?key)(?:[ \t]+|=))((?:"[^"\n]*"|'[^'\n]*'|[^\s"'])+)`), "${1}" + Marker},
	// MySQL and MariaDB clients take the password glued to -p.
	{"a database password", regexp.MustCompile(`(\b(?:mysql|mysqldump|mysqladmin|mysqlcheck|mysqlimport|mysqlshow|mariadb|mariadb-dump|mariadb-admin)\b[^\n|;&]*?[ \t]-p)([^\s"']+|"[^"\n]*"|'[^'\n]*')`), "${1}" + Marker},
	// curl -u user:password, --user user:password, -uuser:password.
	{"a password for curl", regexp.MustCompile(`((?:^|[ \t])(?:-u[ \t]*|--user[ \t=]+|--proxy-user[ \t=]+|-U[ \t]*)["']?[^\s:"']+:)([^\s"']+)`), "${1}" + Marker},
	// key=value and key: value, including JSON and YAML keys, for names
	// that say they hold a secret.
	{"a secret setting", regexp.MustCompile(`(?i)(\b[A-Za-z0-9_.-]*(?:password|passwd|passphrase|secret|token|api[-_]?key|apikey|access[-_]?key|private[-_]?key|credentials?)[A-Za-z0-9_.-]*["']?[ \t]*[=:][ \t]*)((?:"[^"\n]*"|'[^'\n]*'|[^\s"'&,;])+)`), "${1}" + Marker},
	// Short spellings in environment files: DB_PASS=, SMTP_PWD=, pass: x.
	{"a secret setting", regexp.MustCompile(`(?i)(\b(?:[A-Za-z0-9]+_)*(?:pass|pwd|psk)["']?[ \t]*[=:][ \t]*)((?:"[^"\n]*"|'[^'\n]*'|[^\s"'&,;])+)`), "${1}" + Marker},
	// Password hashes as in /etc/shadow: $id$salt$hash (md5, bcrypt,
	// sha256, sha512, yescrypt, scrypt).
	{"a password hash", regexp.MustCompile(`\$(?:1|2[abxy]?|5|6|7|y|gy|sha1|md5|apr1|argon2(?:id|i|d))\$[./A-Za-z0-9$=,+-]{8,}`), Marker},
	// Django's and Passlib's PBKDF2 hashes: pbkdf2_sha256$iterations$salt$hash.
	{"a password hash", regexp.MustCompile(`\bpbkdf2_sha(?:1|256|512)\$\d+\$[A-Za-z0-9./+=]+\$[A-Za-z0-9./+=]{8,}`), Marker},
	// LDAP userPassword values: {SSHA}base64, {SHA512}, {CRYPT}$6$..., {PBKDF2-SHA256}...
	{"a password hash", regexp.MustCompile(`\{(?:S?SHA(?:256|384|512)?|S?MD5|CRYPT|PBKDF2(?:-SHA(?:1|256|512))?|ARGON2)\}[A-Za-z0-9+/=.$,:-]{8,}`), Marker},
	// PostgreSQL's .pgpass: hostname:port:database:username:password per
	// line, where a password may hold \: and \\.
	{"a .pgpass password", regexp.MustCompile(`(?m)^([ \t]*[^:\s#][^:\s]*:(?:\d{1,5}|\*):[^:\s]+:[^:\s]+:)((?:\\[:\\]|[^\s:\\])+)[ \t]*$`), "${1}" + Marker},
	// Ceph keyrings: key = AQ... (base64 of a 16-byte secret plus header).
	{"a Ceph key", regexp.MustCompile(`\bAQ[A-Za-z0-9+/]{36,}={0,2}`), Marker},
	// JSON Web Tokens: three base64url parts, the first two JSON objects.
	{"a JSON Web Token", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`), Marker},
	// Well-known token shapes wherever they appear: GitHub, Slack, AWS
	// access key ids, OpenAI-style and OpenRouter keys, Matrix access
	// tokens, GitLab, Stripe, Google API keys, HashiCorp Vault (service,
	// batch and recovery), Grafana Cloud and service account tokens, npm.
	{"an API token", regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|sk-[A-Za-z0-9_-]{20,}|syt_[A-Za-z0-9_]{10,}|glpat-[A-Za-z0-9_-]{20,}|[rsp]k_(?:live|test)_[A-Za-z0-9]{10,}|AIza[0-9A-Za-z_-]{35}|hv[sbr]\.[A-Za-z0-9_-]{20,}|glc_[A-Za-z0-9+/_-]{32,}={0,2}|glsa_[A-Za-z0-9]{32}_[0-9a-fA-F]{8}|npm_[A-Za-z0-9]{36})`), Marker},
}

// String removes secrets from s: values of password=, token=, secret=,
// api_key=, *_PASS= style settings (also as flags, JSON or YAML),
// Authorization headers, bearer tokens and cookies, PEM private key blocks
// (also base64-encoded), the password in scheme://user:password@host URLs,
// mysql -pPASSWORD and curl -u user:password, password hashes as in
// /etc/shadow, htpasswd ($apr1$), Django (pbkdf2_sha256$) and LDAP
// ({SSHA}), .pgpass passwords, Ceph keys, Proxmox API tokens, JSON Web
// Tokens, Slack webhook URLs, well-known token formats (GitHub, Slack, AWS,
// OpenAI, Matrix, GitLab, Stripe, Google, Vault, Grafana, npm) and hex dumps
// (xxd, xxd -p, hexdump -C, od -t x1) of a private key. It errs towards
// removing too much.
// String(String(s)) == String(s).
func String(s string) string {
	s, _ = keyDumps(s)
	for _, r := range rules {
		s = r.re.ReplaceAllString(s, r.repl)
	}
	return s
}

// Find reports the kind of the first secret String would remove from s,
// such as "a private key", or ok false when there is none. The gate uses it
// to refuse a plan whose own command carries a secret: a card must show a
// command exactly as it will run, never disguised.
func Find(s string) (kind string, ok bool) {
	if _, found := keyDumps(s); found {
		return "a hex dump of a private key", true
	}
	for _, r := range rules {
		if loc := r.re.FindStringSubmatchIndex(s); loc != nil {
			// A match whose secret part is already the marker is no secret.
			if r.re.ReplaceAllString(s, r.repl) != s {
				return r.kind, true
			}
		}
	}
	return "", false
}
