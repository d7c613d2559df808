package extid

import (
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// pathSpecial are the characters that a front end between payout and the
// PSP may act on inside a path segment even when they are
// percent-encoded, because it decodes the path before it routes it
// (nginx, Apache, most gateways):
//
//   - '/' separates segments (RFC 3986 section 3.3); '\' does too for IIS,
//     Tomcat with ALLOW_BACKSLASH and every WHATWG URL parser;
//   - '%' starts an escape: a front end that decodes twice turns "%2e%2e"
//     into "..";
//   - ';' starts path parameters, which Tomcat, Jetty and Spring drop;
//   - '?' and '#' end the path (RFC 3986 section 3.3).
const pathSpecial = `/\%;?#`

// PathProblem says why id cannot be sent as one URL path segment that
// every front end passes on unchanged (RFC 3986), or "" when it can. An id
// it refuses could reach the PSP as another path, whose 404 would be taken
// for the absence of our order. It refuses:
//
//   - "." and "..", the dot segments that every RFC 3986 front end removes
//     (section 5.2.4), even percent-encoded, and any id that ends with a
//     dot (IIS and other Windows servers drop trailing dots);
//   - leading or trailing white space (trimmed by many frameworks);
//   - the characters of pathSpecial;
//   - ids that become one of these under Unicode compatibility
//     normalization (NFKC: the fullwidth "．．" or "／"), which some
//     servers apply.
//
// It does not judge the other characters: PathSegment encodes them.
func PathProblem(id string) string {
	if msg := pathProblem(id); msg != "" {
		return msg
	}
	if k := norm.NFKC.String(id); k != id {
		if msg := pathProblem(k); msg != "" {
			return fmt.Sprintf("reads as %q once Unicode compatibility forms are folded (NFKC), which some servers do, and then %s", k, msg)
		}
	}
	return ""
}

func pathProblem(id string) string {
	switch {
	case id == "." || id == "..":
		return fmt.Sprintf("is %q, a dot segment: a URL path that ends with it names another resource (RFC 3986 section 5.2.4), so the PSP could never be asked about this order", id)
	case strings.HasSuffix(id, "."):
		return "ends with a dot, which Windows web servers drop from a URL path"
	case strings.TrimFunc(id, unicode.IsSpace) != id:
		return "starts or ends with a space, which web servers and frameworks trim"
	}
	if i := strings.IndexAny(id, pathSpecial); i >= 0 {
		c := id[i : i+1]
		return fmt.Sprintf("contains %q, which a web server in front of the PSP may take as part of the URL path's syntax even when encoded (not allowed: %s)", c, spaced(pathSpecial))
	}
	return ""
}

// spaced is "/ \ % ; ? #".
func spaced(s string) string { return strings.Join(strings.Split(s, ""), " ") }

// PathSegment is the only way an id (an externalId or a PSP order id) is
// put into a URL: every byte outside RFC 3986's unreserved set (ALPHA,
// DIGIT, "-", ".", "_", "~") is percent-encoded, upper-case hex, UTF-8
// bytes one by one. url.PathUnescape of the result is the id again. It
// does not make a dot segment safe ("." is unreserved, and front ends
// decode "%2E" before removing dot segments): PathProblem refuses those.
func PathSegment(id string) string {
	const hex = "0123456789ABCDEF"
	n := 0
	for i := 0; i < len(id); i++ {
		if !unreserved(id[i]) {
			n++
		}
	}
	if n == 0 {
		return id
	}
	b := make([]byte, 0, len(id)+2*n)
	for i := 0; i < len(id); i++ {
		c := id[i]
		if unreserved(c) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	return string(b)
}

// unreserved reports whether c is in RFC 3986's unreserved set (section 2.3).
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}
