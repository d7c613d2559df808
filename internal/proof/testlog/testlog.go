// Package testlog is a goroutine-safe log sink for tests: servers, workers
// and clients write to it from many goroutines while the test reads it, to
// assert what was logged (and what never was: card numbers, tokens).
package testlog

import (
	"strings"
	"sync"
)

// Buffer collects log output. The zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Tail returns the last n lines written.
func (b *Buffer) Tail(n int) string {
	s := b.String()
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n+1 {
		lines = lines[len(lines)-n-1:]
	}
	return strings.Join(lines, "")
}
