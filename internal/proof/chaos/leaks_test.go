package chaos

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestScan(t *testing.T) {
	s := NewScanner([]string{cardA, cardB, ""}, map[string]string{"token": "s3cr3t-t0ken", "empty": ""})
	tests := []struct {
		name string
		text string
		want []string // What of each leak, in order
	}{
		{"nothing", `{"level":"info","amount":"10.50","externalId":"CH-1"}`, nil},
		{"masked card is fine", "card 411111******1111 declined", nil},
		{"plain card", `{"cardNumber":"4111111111111111"}`, []string{"card 411111******1111"}},
		{"grouped with spaces", "pay 4111 1111 1111 1111 now", []string{"card 411111******1111"}},
		{"grouped with dashes", "5555-5555-5555-4444", []string{"card 555555******4444"}},
		{"run into other digits", "id=0041111111111111119", []string{"card 411111******1111"}},
		{"same card twice on a line counts once", cardA + " " + "x" + cardA, []string{"card 411111******1111"}},
		{"two cards", cardA + "," + cardB, []string{"card 411111******1111", "card 555555******4444"}},
		{"other Luhn-valid numbers are not ours", "4012888888881881 378282246310005", nil},
		{"a double separator ends a number", "41111111  11111111", nil},
		{"secret", `Authorization: Bearer s3cr3t-t0ken`, []string{"token"}},
		{"secret and card", "s3cr3t-t0ken " + cardB, []string{"token", "card 555555******4444"}},
		{"part of a secret is fine", "s3cr3t-t0ke", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, l := range s.Scan("f", []byte(tt.text)) {
				if l.Where != "f" || l.Line != 1 {
					t.Errorf("leak at %s:%d, want f:1", l.Where, l.Line)
				}
				got = append(got, l.What)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Scan(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestScanLines(t *testing.T) {
	s := NewScanner([]string{cardA}, nil)
	got := s.Scan("log", []byte("one\ntwo "+cardA+"\nthree\n"+cardA))
	want := []Leak{{"log", 2, "card 411111******1111"}, {"log", 4, "card 411111******1111"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestScanTree(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("logs/worker.log", "ok\nleaked "+cardA+"\n")
	write("spool/outbox/a.result.csv", "CH-1,10.50,card 411111******1111,created\n")
	write("spool/done/a.csv", "CH-1,10.50,"+cardA+",\n")
	write("secrets/psp.token", "tok-123\n")
	write("ui/end-01.txt", "GET /x\n{\"payload\":\"tok-123\"}")
	s := NewScanner([]string{cardA}, map[string]string{"token": "tok-123"})
	skip := map[string]bool{"spool/done": true, "secrets": true}
	leaks, files, err := s.ScanTree(dir, func(rel string) bool { return skip[rel] })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range leaks {
		got = append(got, l.String())
	}
	want := []string{"logs/worker.log:2: card 411111******1111", "ui/end-01.txt:2: token"}
	if files != 3 || !reflect.DeepEqual(got, want) {
		t.Errorf("read %d files (want 3), leaks %q, want %q", files, got, want)
	}
	for _, l := range got {
		if strings.Contains(l, cardA) || strings.Contains(l, "tok-123") {
			t.Errorf("a leak report shows the secret: %q", l)
		}
	}
}
