package ui

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParseTrustedProxies reads a comma-separated list of addresses and CIDR
// prefixes (payout ui --trusted-proxies): the reverse proxies whose
// X-Forwarded-For the UI believes. An empty list trusts none.
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, &ConfigError{Err: ErrBadTrustedProxy, Detail: fmt.Sprintf("%q: want an address or a CIDR prefix, such as 10.0.0.5 or 10.0.0.0/24", f)}
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// clientAddrKey holds the client address realClient found.
type clientAddrKey struct{}

// realClient finds each request's client address once, for the limiter
// and the logs: the connection's remote address, unless that is one of the
// trusted proxies; then the right-most address of X-Forwarded-For that is
// not a trusted proxy (the left part of the header is whatever the client
// sent, so it is never believed). Without trusted proxies the header is
// ignored.
func realClient(next http.Handler, trusted []netip.Prefix) http.Handler {
	if len(trusted) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip := clientAddr(r, trusted)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientAddrKey{}, ip)))
	})
}

func clientAddr(r *http.Request, trusted []netip.Prefix) string {
	host := remoteHost(r)
	if !isTrusted(host, trusted) {
		return host
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		a, err := netip.ParseAddr(hop)
		if err != nil {
			// Not an address: nothing left of it can be believed; the
			// last trusted hop is the client as far as we know.
			return host
		}
		if !isTrusted(hop, trusted) {
			return a.Unmap().String()
		}
		host = a.Unmap().String()
	}
	return host
}

func isTrusted(host string, trusted []netip.Prefix) bool {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// remoteHost is the host part of the connection's remote address.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// clientIP is the client's address as realClient found it: the
// connection's remote address, or behind a trusted proxy
// (Config.TrustedProxies) the address it forwarded for.
func clientIP(r *http.Request) string {
	if ip, ok := r.Context().Value(clientAddrKey{}).(string); ok {
		return ip
	}
	return remoteHost(r)
}
