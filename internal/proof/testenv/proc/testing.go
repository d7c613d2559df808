package proc

import "testing"

// StartT starts the process for a test: a failure to start fails the
// test; at cleanup the process is killed if still running, and its output
// tail is logged if the test failed.
func StartT(t testing.TB, s Spec) *Proc {
	t.Helper()
	p, err := Start(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s %v (last 4 KiB of its output):\n%s", s.Name, s.Args, p.Tail(4096))
		}
	})
	return p
}
