// Command healthcheck is a tiny probe for container health checks in images
// that have no shell, curl or wget (distroless). It takes one URL:
//
//	healthcheck http://127.0.0.1:9102/metrics   # healthy on a 2xx or 3xx answer
//	healthcheck tcp://127.0.0.1:8080            # healthy when the port accepts
//
// It exits 0 when healthy, 1 when not, 2 on a usage error, and prints one
// line to stderr explaining a failure. It never follows redirects and never
// prints a response body.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"
)

// Exit codes.
const (
	exitHealthy   = 0
	exitUnhealthy = 1
	exitUsage     = 2
)

// errUsage marks a bad command line.
var errUsage = errors.New("usage")

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stderr))
}

// run parses args, probes the target and returns the exit code.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: healthcheck [-timeout 3s] http://host:port/path | tcp://host:port")
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := probe(ctx, fs.Arg(0)); err != nil {
		fmt.Fprintf(stderr, "healthcheck: %v\n", err)
		if errors.Is(err, errUsage) {
			return exitUsage
		}
		return exitUnhealthy
	}
	return exitHealthy
}

// probe checks one target URL.
func probe(ctx context.Context, target string) error {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%w: %q is not a URL with a host", errUsage, target)
	}
	switch u.Scheme {
	case "tcp":
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			return fmt.Errorf("dial %s: %w", u.Host, err)
		}
		return conn.Close()
	case "http", "https":
		return probeHTTP(ctx, u)
	default:
		return fmt.Errorf("%w: scheme %q (want http, https or tcp)", errUsage, u.Scheme)
	}
}

func probeHTTP(ctx context.Context, u *url.URL) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	client := &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s%s: %w", u.Host, u.Path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s%s: status %d", u.Host, u.Path, resp.StatusCode)
	}
	return nil
}
