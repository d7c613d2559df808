package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			_, _ = w.Write([]byte("up 1\n"))
		case "/redirect":
			http.Redirect(w, r, "/broken", http.StatusFound)
		case "/broken":
			http.Error(w, "boom", http.StatusInternalServerError)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	// A port that was open and is now closed: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()

	tests := []struct {
		name    string
		args    []string
		want    int
		wantErr string
	}{
		{"http 200", []string{srv.URL + "/metrics"}, exitHealthy, ""},
		{"redirect not followed", []string{srv.URL + "/redirect"}, exitHealthy, ""},
		{"http 404", []string{srv.URL + "/nope"}, exitUnhealthy, "status 404"},
		{"http 500", []string{srv.URL + "/broken"}, exitUnhealthy, "status 500"},
		{"tcp open", []string{"tcp://" + host}, exitHealthy, ""},
		{"tcp closed", []string{"-timeout", "1s", "tcp://" + closed}, exitUnhealthy, "dial"},
		{"http closed", []string{"-timeout", "1s", "http://" + closed + "/metrics"}, exitUnhealthy, "GET"},
		{"no args", nil, exitUsage, "usage"},
		{"two args", []string{"tcp://a:1", "tcp://b:1"}, exitUsage, "usage"},
		{"bad scheme", []string{"ftp://x:21"}, exitUsage, "scheme"},
		{"no host", []string{"localhost"}, exitUsage, "not a URL"},
		{"bad flag", []string{"-nope", "tcp://a:1"}, exitUsage, "flag provided but not defined"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			got := run(context.Background(), tc.args, &stderr)
			if got != tc.want {
				t.Fatalf("exit %d, want %d; stderr: %s", got, tc.want, stderr.String())
			}
			if tc.wantErr == "" && stderr.Len() != 0 {
				t.Errorf("unexpected stderr: %s", stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("stderr %q does not mention %q", stderr.String(), tc.wantErr)
			}
		})
	}
}
