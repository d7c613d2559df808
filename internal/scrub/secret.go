package scrub

import (
	"html"
	"strings"
	"unicode/utf8"
)

// Withheld replaces a PSP text that held the PSP token.
const Withheld = "[PSP message withheld: it contained the PSP token]"

// SecretRun is the shortest stretch of a secret that counts as the secret:
// a text holding any 12 consecutive characters of the token holds it.
const SecretRun = 12

// minSecret is the shortest secret looked for at all: a shorter one would
// be found in every text.
const minSecret = 4

// maxDecodeRounds bounds how many layers of escaping are peeled (a JSON
// string inside an HTML page inside a URL...).
const maxDecodeRounds = 3

// WithoutSecret is s, or Withheld when s holds secret (Secret).
func WithoutSecret(s, secret string) string {
	if Secret(s, secret) {
		return Withheld
	}
	return s
}

// Secret reports whether s holds secret, or any SecretRun consecutive
// characters of it, as they are or escaped: JSON ("\/", "\u002f"), HTML
// ("&#x2F;", "&sol;") or URL percent-encoding ("%2F"), in any order and up
// to three layers deep. A secret shorter than SecretRun is looked for
// whole; one shorter than 4 bytes is not looked for.
func Secret(s, secret string) bool {
	if len(secret) < minSecret || s == "" {
		return false
	}
	runs := secretRuns(secret)
	seen := map[string]bool{s: true}
	layer := []string{s}
	for round := 0; ; round++ {
		for _, v := range layer {
			for _, r := range runs {
				if strings.Contains(v, r) {
					return true
				}
			}
		}
		if round == maxDecodeRounds {
			return false
		}
		var next []string
		for _, v := range layer {
			for _, d := range []func(string) string{unescapeJSON, unescapeHTML, unescapePercent} {
				if u := d(v); !seen[u] {
					seen[u] = true
					next = append(next, u)
				}
			}
		}
		if len(next) == 0 {
			return false
		}
		layer = next
	}
}

// secretRuns are the stretches of secret that must not appear: every
// SecretRun bytes of it, or the whole when it is shorter.
func secretRuns(secret string) []string {
	if len(secret) <= SecretRun {
		return []string{secret}
	}
	out := make([]string, 0, len(secret)-SecretRun+1)
	for i := 0; i+SecretRun <= len(secret); i++ {
		out = append(out, secret[i:i+SecretRun])
	}
	return out
}

func unescapeHTML(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	return html.UnescapeString(s)
}

// unescapeJSON undoes the escapes of a JSON string (\/, \", \\, \uXXXX,
// \n...) wherever they stand; a broken escape is kept as it is.
func unescapeJSON(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		e := s[i+1]
		switch e {
		case '/', '"', '\\', '\'':
			b.WriteByte(e)
			i++
		case 'n', 'r', 't', 'b', 'f':
			b.WriteByte(' ')
			i++
		case 'u':
			if r, ok := hexRune(s, i+2, 4); ok {
				if r < utf8.RuneSelf {
					b.WriteByte(byte(r))
				} else {
					b.WriteRune(r)
				}
				i += 5
				continue
			}
			b.WriteByte(c)
		case 'x':
			if r, ok := hexRune(s, i+2, 2); ok {
				b.WriteByte(byte(r))
				i += 3
				continue
			}
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// unescapePercent decodes %XX wherever it stands; a broken one is kept.
func unescapePercent(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if r, ok := hexRune(s, i+1, 2); ok {
				b.WriteByte(byte(r))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// hexRune reads n hex digits of s at i.
func hexRune(s string, i, n int) (rune, bool) {
	if i+n > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+n]) {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}
