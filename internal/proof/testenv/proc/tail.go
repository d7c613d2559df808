package proc

import (
	"bytes"
	"sync"
)

// TailSize is how many bytes of output a Tail keeps.
const TailSize = 16 << 10

// Tail is an io.Writer that keeps the last TailSize bytes written to it.
type Tail struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (t *Tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(b)
	if extra := t.buf.Len() - TailSize; extra > 0 {
		t.buf.Next(extra)
	}
	return len(b), nil
}

// String returns what is kept.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
