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
// X-Forwarded-For (and, with --proxy-user-header, sign-on header) the UI
// believes. An empty list trusts none. A prefix wider than a /8 (IPv4) or
// a /32 (IPv6) is refused, catch-alls (0.0.0.0/0, ::/0, 0.0.0.0/1 and
// 128.0.0.0/1 together) with them: such a range is not a list of proxies.
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			if p.Addr().Is4In6() {
				return nil, &ConfigError{Err: ErrBadTrustedProxy, Detail: fmt.Sprintf("%q: write an IPv4 prefix as IPv4", f)}
			}
			if min := minTrustedBits(p.Addr()); p.Bits() < min {
				return nil, &ConfigError{Err: ErrBadTrustedProxy, Detail: fmt.Sprintf("%q is wider than a /%d: a trusted proxy may name the signed-in person and any client address; list the proxies (at most a /8 for IPv4, a /32 for IPv6)", f, min)}
			}
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
		a, ok := parseHop(hops[i])
		if !ok {
			// Not an address: nothing left of it can be believed; the
			// last trusted hop is the client as far as we know.
			return host
		}
		if !isTrusted(a.String(), trusted) {
			return a.String()
		}
		host = a.String()
	}
	return host
}

// parseHop reads one X-Forwarded-For entry as proxies write it: an
// address, IP:PORT, [IPv6] or [IPv6]:PORT; the zone is dropped, an
// IPv4-mapped address unmapped.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	a, err := netip.ParseAddr(s)
	if err != nil {
		if ap, perr := netip.ParseAddrPort(s); perr == nil {
			a, err = ap.Addr(), nil
		} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
			a, err = netip.ParseAddr(s[1 : len(s)-1])
		}
	}
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

func isTrusted(host string, trusted []netip.Prefix) bool {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.WithZone("").Unmap()
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

// prefixes prints a list of trusted proxies for the start-up log ("none").
type prefixes []netip.Prefix

func (ps prefixes) String() string {
	if len(ps) == 0 {
		return "none"
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return strings.Join(out, ",")
}

// minTrustedBits is the shortest prefix --trusted-proxies takes for an
// address of a's family: 8 bits for IPv4, 32 for IPv6.
func minTrustedBits(a netip.Addr) int {
	if a.Is4() {
		return 8
	}
	return 32
}
