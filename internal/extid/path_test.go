package extid

import (
	"net/url"
	"strings"
	"testing"
)

func TestPathProblem(t *testing.T) {
	tests := []struct {
		id   string
		want string // a word of the message; "" for a safe id
	}{
		{"PO-1", ""},
		{"PO-café-2", ""},
		{"a b", ""},
		{"a+b=c&d@e:f,g'h(i)!*$~", ""},
		{"...x", ""},
		{"a.b", ""},
		{"Итого-1", ""},
		{".", "dot segment"},
		{"..", "dot segment"},
		{"...", "ends with a dot"},
		{"PO-1.", "ends with a dot"},
		{" PO-1", "space"},
		{"PO-1 ", "space"},
		{"PO-1\u00a0", "space"},
		{"a/b", `"/"`},
		{`a\b`, `"\\"`},
		{"a%2e", `"%"`},
		{"%2e%2e", `"%"`},
		{"a;jsessionid=1", `";"`},
		{"a?b", `"?"`},
		{"a#b", `"#"`},
		{"\uff0e\uff0e", "NFKC"}, // fullwidth full stops: ".."
		{"a\uff0fb", "NFKC"},     // fullwidth solidus
		{"a\ufe68b", "NFKC"},     // small reverse solidus
	}
	for _, tt := range tests {
		got := PathProblem(tt.id)
		switch {
		case tt.want == "" && got != "":
			t.Errorf("PathProblem(%q) = %q, want no problem", tt.id, got)
		case tt.want != "" && !strings.Contains(got, tt.want):
			t.Errorf("PathProblem(%q) = %q, want a message with %q", tt.id, got, tt.want)
		}
	}
}

func TestPathSegment(t *testing.T) {
	tests := []struct{ id, want string }{
		{"PO-1", "PO-1"},
		{"a.b_c~d-e", "a.b_c~d-e"},
		{"a b", "a%20b"},
		{"a/b", "a%2Fb"},
		{"a;b:c@d+e=f&g,h$i!j'k(l)m*n", "a%3Bb%3Ac%40d%2Be%3Df%26g%2Ch%24i%21j%27k%28l%29m%2An"},
		{"%", "%25"},
		{"café", "caf%C3%A9"},
	}
	for _, tt := range tests {
		if got := PathSegment(tt.id); got != tt.want {
			t.Errorf("PathSegment(%q) = %q, want %q", tt.id, got, tt.want)
		}
	}
}

// FuzzPathSegment: the encoding holds only unreserved characters and
// upper-case %XX escapes, and url.PathUnescape gives the id back.
func FuzzPathSegment(f *testing.F) {
	for _, s := range []string{"", "PO-1", "..", "a/b", "%2e", "café", "a b;c?d#e", "\x00\xff", "Итого"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		enc := PathSegment(id)
		for i := 0; i < len(enc); i++ {
			c := enc[i]
			if unreserved(c) {
				continue
			}
			if c != '%' || i+2 >= len(enc) || !upperHex(enc[i+1]) || !upperHex(enc[i+2]) {
				t.Fatalf("PathSegment(%q) = %q: byte %d (%q) is neither unreserved nor a %%XX escape", id, enc, i, c)
			}
			i += 2
		}
		back, err := url.PathUnescape(enc)
		if err != nil || back != id {
			t.Fatalf("url.PathUnescape(PathSegment(%q) = %q) = %q, %v", id, enc, back, err)
		}
		if u, err := url.Parse("http://h/p/" + enc); err != nil || u.Path != "/p/"+id {
			t.Fatalf("url.Parse of the path with %q: %v, path %q", enc, err, u)
		}
	})
}

func upperHex(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }
