// Package redact removes secrets from text before Nomos posts or stores
// it: command output on its way out of the actuator, and anything the bot
// puts in a room. One rule set serves both, so what is hidden does not
// depend on which side saw the text first.
package redact

import "regexp"

// Marker replaces every secret String finds.
const Marker = "[REDACTED]"

const keyMarker = "[REDACTED PRIVATE KEY]"

var rules = []struct {
	re   *regexp.Regexp
	repl string
}{
	// A whole PEM private key block, or its start when the text ends first.
	{regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)`), keyMarker},
	// The end of a block whose start was cut off, as in an output tail.
	{regexp.MustCompile(`(?m)(?:^[A-Za-z0-9+/=]+\r?\n)*-----END [A-Z0-9 ]*PRIVATE KEY-----`), keyMarker},
	// Credentials in a URL: scheme://user:password@host, user optional.
	{regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+@`), "${1}" + Marker + "@"},
	// Authorization: Basic|Token|Digest <credentials>.
	{regexp.MustCompile(`(?i)(\bauthorization["']?[ \t]*[:=][ \t]*["']?(?:basic|token|digest)[ \t]+)[^\s"',;]+`), "${1}" + Marker},
	// Bearer tokens, in a header or anywhere else.
	{regexp.MustCompile(`(?i)(\bbearer[ \t]+)[A-Za-z0-9\-._~+/]{8,}=*`), "${1}" + Marker},
	// --password value and --token=value style flags.
	{regexp.MustCompile(`(?i)(--?(?:password|passwd|token|secret|api[-_]?key|access[-_]?key)(?:[ \t]+|=))((?:"[^"\n]*"|'[^'\n]*'|[^\s"'])+)`), "${1}" + Marker},
	// key=value and key: value, including JSON and YAML keys, for names
	// that say they hold a secret.
	{regexp.MustCompile(`(?i)(\b[A-Za-z0-9_.-]*(?:password|passwd|passphrase|secret|token|api[-_]?key|apikey|access[-_]?key|private[-_]?key|credentials?)[A-Za-z0-9_.-]*["']?[ \t]*[=:][ \t]*)((?:"[^"\n]*"|'[^'\n]*'|[^\s"'&,;])+)`), "${1}" + Marker},
	// Well-known token shapes wherever they appear: GitHub, Slack, AWS
	// access key ids, OpenAI-style and OpenRouter keys, Matrix access
	// tokens, GitLab.
	{regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|sk-[A-Za-z0-9_-]{20,}|syt_[A-Za-z0-9_]{10,}|glpat-[A-Za-z0-9_-]{20,})`), Marker},
}

// String removes secrets from s: values of password=, token=, secret=,
// api_key= style settings (also as flags, JSON or YAML), Authorization
// headers and bearer tokens, PEM private key blocks, the password in
// scheme://user:password@host URLs, and well-known token formats. It errs
// towards removing too much. String(String(s)) == String(s).
func String(s string) string {
	for _, r := range rules {
		s = r.re.ReplaceAllString(s, r.repl)
	}
	return s
}
