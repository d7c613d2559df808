package cli

import (
	"errors"
	"testing"

	"github.com/rs/zerolog"
)

func TestMaxMemoryAdvice(t *testing.T) {
	tests := []struct {
		name string
		got  map[string]string
		err  error
		want zerolog.Level
	}{
		{"no limit", map[string]string{"maxmemory": "0"}, nil, zerolog.WarnLevel},
		{"a limit", map[string]string{"maxmemory": "4294967296"}, nil, zerolog.NoLevel},
		{"CONFIG refused", nil, errors.New("ERR unknown command 'CONFIG'"), zerolog.NoLevel},
		{"not answered", map[string]string{}, nil, zerolog.NoLevel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lvl, msg := maxMemoryAdvice(tt.got, tt.err)
			if lvl != tt.want {
				t.Errorf("level %v (%q), want %v", lvl, msg, tt.want)
			}
			if lvl != zerolog.NoLevel && msg == "" {
				t.Error("a warning with no text")
			}
		})
	}
}
