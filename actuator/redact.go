package actuator

import "regexp"

// redacted replaces every secret Redact finds.
const redacted = "[REDACTED]"

var redactions = []struct {
	re   *regexp.Regexp
	repl string
}{
	// A whole PEM private key block, or its start when the text ends first.
	{regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)`), "[REDACTED PRIVATE KEY]"},
	// The end of a block whose start was cut off, as in an output tail.
	{regexp.MustCompile(`(?m)(?:^[A-Za-z0-9+/=]+\r?\n)*-----END [A-Z0-9 ]*PRIVATE KEY-----`), "[REDACTED PRIVATE KEY]"},
	// Credentials in a URL: scheme://user:password@host, user optional.
	{regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+@`), "${1}" + redacted + "@"},
	// Authorization: Basic|Token|Digest <credentials>.
	{regexp.MustCompile(`(?i)(\bauthorization["']?[ \t]*[:=][ \t]*["']?(?:basic|token|digest)[ \t]+)[^\s"',;]+`), "${1}" + redacted},
	// Bearer tokens, in a header or anywhere else.
	{regexp.MustCompile(`(?i)(\bbearer[ \t]+)[A-Za-z0-9\-._~+/]{8,}=*`), "${1}" + redacted},
	// --password value and --token=value style flags.
	{regexp.MustCompile(`(?i)(--?(?:password|passwd|token|secret|api[-_]?key|access[-_]?key)(?:[ \t]+|=))((?:"[^"\n]*"|'[^'\n]*'|[^\s"'])+)`), "${1}" + redacted},
	// key=value and key: value, including JSON and YAML keys, for names
	// that say they hold a secret.
	{regexp.MustCompile(`(?i)(\b[A-Za-z0-9_.-]*(?:password|passwd|secret|token|api[-_]?key|apikey|access[-_]?key|private[-_]?key)[A-Za-z0-9_.-]*["']?[ \t]*[=:][ \t]*)((?:"[^"\n]*"|'[^'\n]*'|[^\s"'&,;])+)`), "${1}" + redacted},
}

// Redact removes secrets from text before it leaves the actuator: values of
// password=, token=, secret= and api_key= style settings (also as flags,
// JSON or YAML), Authorization headers and bearer tokens, PEM private key
// blocks, and the password in URLs of the form scheme://user:password@host.
// It errs towards removing too much. Redact(Redact(s)) == Redact(s).
func Redact(s string) string {
	for _, r := range redactions {
		s = r.re.ReplaceAllString(s, r.repl)
	}
	return s
}
