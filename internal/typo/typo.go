// Package typo finds the known word a mistyped one most likely meant: a
// config key, a command's verb, an entity's name.
package typo

// Distance is the edit distance between a and b, in bytes: how many
// single-byte insertions, deletions, substitutions and swaps of two
// neighbours turn one into the other (the optimal string alignment
// distance). A swap counts one, since "restrat" is one slip of the
// fingers from "restart".
func Distance(a, b string) int {
	// d[i][j] is the distance between a[:i] and b[:j]; three rows suffice.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// Near is how far a word of n bytes may be from the one it was meant to
// be: one edit in a short word, two from eight bytes on. Below three
// bytes nothing is near, since every short word is near another.
func Near(n int) int {
	switch {
	case n < 3:
		return 0
	case n < 8:
		return 1
	}
	return 2
}

// Nearest returns the candidate nearest to word within limit edits, the
// first in candidates' order among equals, and false when none is that
// near or word is itself a candidate.
func Nearest(word string, candidates []string, limit int) (string, bool) {
	best, bestD := "", limit+1
	for _, c := range candidates {
		if c == word {
			return "", false
		}
		if d := Distance(word, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best, best != ""
}
