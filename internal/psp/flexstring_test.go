package psp

import (
	"encoding/json"
	"testing"
)

// TestFlexStringMatchesTheDecoder checks the escape-free fast path against
// encoding/json itself: every JSON string must decode to what json.Unmarshal
// makes of it, escapes and invalid UTF-8 included.
func TestFlexStringMatchesTheDecoder(t *testing.T) {
	for _, lit := range []string{
		`""`, `"ORD-1"`, `"ÄÖ ünïcödé"`, `"a\"b"`, `"tab\there"`, `"\u00e9"`, `"\ud83d\ude00"`,
		"\"bad \xff utf8\"", "\"trunc \xe2\x82\"", `"back\\slash"`, `"  spaced  "`,
	} {
		var want string
		if err := json.Unmarshal([]byte(`{"v":`+lit+`}`), &struct{ V *string }{&want}); err != nil {
			t.Fatalf("%s: reference decode: %v", lit, err)
		}
		var got struct{ V flexString }
		if err := json.Unmarshal([]byte(`{"v":`+lit+`}`), &got); err != nil {
			t.Fatalf("%s: %v", lit, err)
		}
		if string(got.V) != want {
			t.Errorf("%s: got %q, want %q", lit, got.V, want)
		}
	}
	for lit, want := range map[string]string{`12.50`: "12.50", `-3`: "-3", `null`: "", `true`: "", `{"x":1}`: "", `[1]`: ""} {
		var got struct{ V flexString }
		if err := json.Unmarshal([]byte(`{"v":`+lit+`}`), &got); err != nil {
			t.Fatalf("%s: %v", lit, err)
		}
		if string(got.V) != want {
			t.Errorf("%s: got %q, want %q", lit, got.V, want)
		}
	}
}
