package scrub

import (
	"errors"
	"html"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/acme/payout/internal/card"
)

const token = "tok_live_9fQ2xZ/8bK+w=Lr3Vn7Pq1Ys5Ta4Uc" // 38 characters, with / + =

func TestText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"", 0, ""},
		{"  paid by\thand \r\nbob ", 0, "paid by hand bob"},
		{"card 4111 1111 1111 1111 pasted", 0, "card 411111******1111 pasted"},
		{"order 100000000001", 0, "order 100000000001"}, // fails Luhn: an id
		{"bad \xff utf8", 0, "bad ? utf8"},
		{"line\u2028sep", 0, "line sep"},
		// The scrub comes before the cut: a card across the cut is masked,
		// not cut to 11 digits that nothing recognises.
		{"xxxxxxxxxx 4111111111111111", 20, "xxxxxxxxxx 411111..."},
		{"héllo", 4, "h..."},
	} {
		if got := Text(tc.in, tc.max); got != tc.want {
			t.Errorf("Text(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

func TestNote(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		refused        bool
	}{
		{"plain", "paid by hand", "paid by hand", false},
		{"card", "card 4111-1111-1111-1111", "card 411111******1111", false},
		{"carriage return", "ok\rbob approved", "", true},
		{"line break", "ok\nbob approved", "", true},
		{"escape", "ok \x1b[2K", "", true},
		{"too long", strings.Repeat("é", MaxNote+1), "", true},
		{"longest", strings.Repeat("é", MaxNote), strings.Repeat("é", MaxNote), false},
		{"not utf-8", "a\xffb", "", true},
	} {
		got, err := Note(tc.in)
		if tc.refused {
			if !errors.Is(err, ErrRefused) {
				t.Errorf("%s: Note = %q, %v; want refused", tc.name, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: Note = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestSecret(t *testing.T) {
	header := "Authorization: Bearer " + token
	jsonEsc := strings.ReplaceAll(header, "/", `\/`)
	uEsc := strings.NewReplacer("/", `\u002f`, "+", `\u002B`, "=", `\u003d`).Replace(header)
	for _, tc := range []struct {
		name string
		in   string
		want bool
	}{
		{"plain", "echo: " + header, true},
		{"json slash", `{"headers":{"Authorization":"` + jsonEsc + `"}}`, true},
		{"json unicode", `{"h":"` + uEsc + `"}`, true},
		{"html", "<pre>" + html.EscapeString(strings.ReplaceAll(header, "/", "&#x2F;")) + "</pre>", true},
		{"html named", strings.ReplaceAll(header, "/", "&sol;"), true},
		{"url", "GET /?h=" + url.QueryEscape(header), true},
		{"json in url", url.QueryEscape(jsonEsc), true},
		{"first 12", "cut at " + token[:12], true},
		{"last 12", token[len(token)-12:] + " and more", true},
		{"middle 12", "x" + token[13:25] + "x", true},
		{"11 only", "x" + token[:11] + "x", false},
		{"other text", "HTTP 502 Bad Gateway", false},
		{"empty", "", false},
	} {
		if got := Secret(tc.in, token); got != tc.want {
			t.Errorf("%s: Secret(%q) = %v, want %v", tc.name, tc.in, got, tc.want)
		}
	}
	if Secret("abc", "ab") {
		t.Error("a secret of 2 bytes is found")
	}
	if !Secret("the key is s3cr3t!", "s3cr3t") {
		t.Error("a short secret is not found whole")
	}
	if got := WithoutSecret("echo "+jsonEsc, token); got != Withheld {
		t.Errorf("WithoutSecret = %q", got)
	}
	if got := WithoutSecret("HTTP 500", token); got != "HTTP 500" {
		t.Errorf("WithoutSecret changed a clean text: %q", got)
	}
}

// FuzzText: Text never panics; its result is valid UTF-8 without control
// characters, within the bound, idempotent when not cut, and holds no run
// that may be a card. A secret put anywhere in the text, escaped or not, is
// found, and WithoutSecret leaves nothing of it.
func FuzzText(f *testing.F) {
	f.Add("card 4111 1111 1111 1111 pasted", 0, "")
	f.Add("ok\rbob approved", 30, `\/`)
	f.Add(strings.Repeat("x", 290)+"Bearer "+token, 300, "&#x2F;")
	f.Add("5500-0000-0000-0004", 12, "%2F")
	f.Fuzz(func(t *testing.T, s string, max int, slash string) {
		got := Text(s, max)
		if !utf8.ValidString(got) {
			t.Fatalf("Text(%q) = %q: not UTF-8", s, got)
		}
		for _, r := range got {
			if Control(r) {
				t.Fatalf("Text(%q) = %q holds control %U", s, got, r)
			}
		}
		if max >= 3 && len(got) > max {
			t.Fatalf("Text(%q, %d) = %q: longer than the bound", s, max, got)
		}
		if max <= 0 {
			if again := Text(got, 0); again != got {
				t.Fatalf("not idempotent: %q then %q", got, again)
			}
			for run := range card.Runs(got) {
				if card.MayHoldCard(run) {
					t.Fatalf("Text(%q) = %q shows a card-like run %q", s, got, run.Digits())
				}
			}
		}
		for _, esc := range []string{`\/`, `\u002f`, "&#x2F;", "&#47;", "%2F", "%2f", `%5C%2F`, `\\\/`} {
			if !strings.HasPrefix(slash, esc) {
				continue
			}
			in := s + strings.ReplaceAll(token, "/", esc) + s
			if !Secret(in, token) {
				t.Fatalf("token escaped with %q not found in %q", esc, in)
			}
		}
		if w := WithoutSecret(s+token[5:20]+s, token); w != Withheld {
			t.Fatalf("WithoutSecret kept %q", w)
		}
	})
}
