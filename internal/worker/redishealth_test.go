package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestRedisHealthLogsOneLineEachWay(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		pings []error
		want  []string // messages logged, in order
	}{
		{"always up", []error{nil, nil, nil}, nil},
		{"down for good", []error{nil, refused, refused, refused}, []string{"Redis unreachable"}},
		{"down then back", []error{refused, refused, nil, nil}, []string{"Redis unreachable", "Redis reachable again"}},
		{"flapping", []error{refused, nil, refused, nil}, []string{"Redis unreachable", "Redis reachable again", "Redis unreachable", "Redis reachable again"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			h := redisHealth{log: zerolog.New(&buf)}
			for i, err := range tt.pings {
				h.observe(err, t0.Add(time.Duration(i)*redisPingEvery))
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				if line == "" {
					continue
				}
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				msg, _ := rec["message"].(string)
				got = append(got, strings.SplitN(msg, ":", 2)[0])
				if msg == "Redis reachable again" && rec["outage"] == nil {
					t.Errorf("the back line has no outage length: %s", line)
				}
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("logged %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRedisHealthBackLineSaysHowLong(t *testing.T) {
	var buf bytes.Buffer
	h := redisHealth{log: zerolog.New(&buf)}
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	h.observe(errors.New("i/o timeout"), t0)
	h.observe(errors.New("connection refused"), t0.Add(10*time.Second))
	buf.Reset()
	h.observe(nil, t0.Add(30*time.Second))
	var rec struct {
		Outage    float64 `json:"outage"`
		LastError string  `json:"last_error"`
	}
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("%s: %v", buf.String(), err)
	}
	if rec.Outage != 30000 || rec.LastError != "connection refused" {
		t.Errorf("outage %v ms, last error %q; want 30000 ms, %q", rec.Outage, rec.LastError, "connection refused")
	}
}

func TestAsynqLoggerStormIsSampled(t *testing.T) {
	var buf bytes.Buffer
	l := newAsynqLogger(zerolog.New(&buf))
	for i := 0; i < 230; i++ {
		l.Error("Failed to dequeue: UNKNOWN: redis command error: dial tcp: connection refused")
	}
	if n := strings.Count(buf.String(), "\n"); n != asynqLogBurst {
		t.Errorf("230 Asynq errors in a burst logged %d lines, want %d", n, asynqLogBurst)
	}
}
