package redact

import (
	"bytes"
	"encoding/hex"
	"regexp"
	"strings"
)

// Hex dump lines, with the offset and the text column left out of the
// submatch that holds the bytes: xxd, hexdump -C, od -A x -t x1z, and the
// bare hex of xxd -p.
var dumpLines = []*regexp.Regexp{
	regexp.MustCompile(`^[0-9a-fA-F]{6,}: ((?:[0-9a-fA-F]{2,8} ?)+)(?:  .*)?$`),
	regexp.MustCompile(`^[0-9a-fA-F]{7,8}  ((?:[0-9a-fA-F]{2}  ?)+) *(?:\|.*\|)?$`),
	regexp.MustCompile(`^[0-9a-fA-F]{6,}((?: [0-9a-fA-F]{2})+) *(?:>.*<)?$`),
	regexp.MustCompile(`^([0-9a-fA-F]{16,})$`),
}

// keyMarkers are what the bytes of a private key hold: a PEM block's
// armour, or the OpenSSH and PuTTY formats' magic.
var keyMarkers = [][]byte{
	[]byte("PRIVATE KEY-----"), []byte("-----BEGIN OPENSSH"), []byte("openssh-key-v1\x00"),
	[]byte("PuTTY-User-Key-File"), []byte("-----BEGIN PGP PRIVATE"),
}

// dumpBytes returns the bytes a hex dump line shows, or ok false when the
// line is not one.
func dumpBytes(line string) (b []byte, ok bool) {
	line = strings.TrimRight(line, " \t\r")
	for _, re := range dumpLines {
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		h := strings.Join(strings.Fields(m[1]), "")
		if len(h)%2 == 1 {
			return nil, false
		}
		b, err := hex.DecodeString(h)
		return b, err == nil
	}
	return nil, false
}

// keyDumps replaces each run of hex dump lines whose bytes hold a private
// key (xxd /root/.ssh/id_rsa, hexdump -C of a .key file) with the key
// marker, and reports whether it found one.
func keyDumps(s string) (string, bool) {
	if !strings.Contains(s, "\n") && len(s) < 32 {
		return s, false
	}
	lines := strings.SplitAfter(s, "\n")
	var out strings.Builder
	found := false
	for i := 0; i < len(lines); {
		j := i
		var data []byte
		for j < len(lines) {
			b, ok := dumpBytes(strings.TrimSuffix(lines[j], "\n"))
			if !ok {
				break
			}
			data = append(data, b...)
			j++
		}
		if j == i {
			out.WriteString(lines[i])
			i++
			continue
		}
		if holdsKey(data) {
			found = true
			out.WriteString(keyMarker)
			if strings.HasSuffix(lines[j-1], "\n") {
				out.WriteByte('\n')
			}
		} else {
			for _, l := range lines[i:j] {
				out.WriteString(l)
			}
		}
		i = j
	}
	if !found {
		return s, false
	}
	return out.String(), true
}

func holdsKey(data []byte) bool {
	for _, m := range keyMarkers {
		if bytes.Contains(data, m) {
			return true
		}
	}
	return false
}
