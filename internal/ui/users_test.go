package ui

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"
)

const (
	alicePass = "alice-correct-horse"
	bobPass   = "bob-battery-staple"
)

var (
	hashesOnce         sync.Once
	aliceHash, bobHash string
	lowCostHash        string
	hashesErr          error
)

// testHashes makes the bcrypt hashes of the tests once per test binary:
// at cost 10 each takes ~50 ms (more under -race).
func testHashes(t testing.TB) (alice, bob string) {
	t.Helper()
	hashesOnce.Do(func() {
		gen := func(pw string, cost int) string {
			h, err := bcrypt.GenerateFromPassword([]byte(pw), cost)
			if err != nil {
				hashesErr = err
			}
			return string(h)
		}
		aliceHash, bobHash = gen(alicePass, MinUserCost), gen(bobPass, MinUserCost)
		lowCostHash = gen("low", bcrypt.MinCost)
	})
	if hashesErr != nil {
		t.Fatal(hashesErr)
	}
	return aliceHash, bobHash
}

// withCost is hash with its cost digits replaced: a hash of another cost
// without the time it takes to make one.
func withCost(hash, cost string) string { return hash[:4] + cost + hash[6:] }

// TestUsers returns the logins alice and bob (passwords alicePass and
// bobPass).
func testUsers(t testing.TB) *Users {
	t.Helper()
	a, b := testHashes(t)
	u, err := ParseUsers("users", strings.NewReader("alice:"+a+"\nbob:"+b+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestUsersIdentity: a login and a single sign-on name of one person map
// to one identity; other names to their canonical form.
func TestUsersIdentity(t *testing.T) {
	a, b := testHashes(t)
	u, err := ParseUsers("users", strings.NewReader("alice:"+a+":alice@example.com\nBob:"+b+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"alice": "alice@example.com", "ALICE": "alice@example.com", "alice@example.com": "alice@example.com",
		"Alice@Example.COM": "alice@example.com", "bob": "bob", "carol": "carol", "alice\u200b": "", "": "",
	} {
		if got := u.Identity(name); got != want {
			t.Errorf("Identity(%+q) = %q, want %q", name, got, want)
		}
	}
	if got := (*Users)(nil).Identity(" Carol "); got != "carol" {
		t.Errorf("without a users file: %q", got)
	}
}

func TestParseUsers(t *testing.T) {
	a, b := testHashes(t)
	as := func(prefix string) string { return prefix + a[4:] } // same hash, another bcrypt variant
	tests := []struct {
		name   string
		file   string
		line   int    // 0 with want "": accepted
		want   string // in the message
		logins int
	}{
		{"htpasswd output", "alice:" + a + "\n\n", 0, "", 1},
		{"comments, blank lines, CRLF", "# ops\r\n\r\n  \nalice:" + a + "\r\n# bob\nbob:" + b + "\n", 0, "", 2},
		{"$2a$, $2b$, $2y$", "a:" + as("$2a$") + "\nb.x_y-z@corp:" + as("$2b$") + "\nc:" + as("$2y$"), 0, "", 3},
		{"no colon", "# x\nalice " + a + "\n", 2, "no ':'", 0},
		{"empty name", "\n:" + a + "\n", 2, "empty user name", 0},
		{"space in the name", "al ice:" + a, 1, `"al ice" has a character other than`, 0},
		{"slash in the name", "ok:" + a + "\nx/y:" + b, 2, "character other than", 0},
		{"non-ASCII name", "zoë:" + a, 1, "character other than", 0},
		{"name too long", strings.Repeat("n", 65) + ":" + a, 1, "longer than 64", 0},
		{"reserved ui-token", "ui-token:" + a, 1, `"ui-token" is reserved`, 0},
		{"reserved ui-local", "UI-Local:" + a, 1, "is reserved", 0},
		{"MD5 (htpasswd -m)", "alice:$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/", 1, "not bcrypt", 0},
		{"SHA1 (htpasswd -s)", "alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", 1, "payout passwd alice", 0},
		{"plain text", "alice:" + alicePass, 1, "only bcrypt", 0},
		{"truncated bcrypt", "alice:" + a[:40], 1, "not bcrypt", 0},
		{"bcrypt $2x$", "alice:" + as("$2x$"), 1, "not bcrypt", 0},
		{"bcrypt with more after it", "alice:" + a + "x", 1, "not bcrypt", 0},
		{"bcrypt, then a comment", "alice:" + a + " # x", 1, "not bcrypt", 0},
		{"an identity per login", "alice:" + a + ":Alice@Example.com\nal:" + b + ":alice@example.com\nbob:" + b, 0, "", 3},
		{"an identity with a zero-width space", "alice:" + a + ":alice\u200b@example.com", 1, "U+200B", 0},
		{"an empty identity", "alice:" + a + ":", 1, "is empty", 0},
		{"a system identity", "alice:" + a + ":system:spool(x)", 1, "names systems", 0},
		{"an identity that is another login", "alice:" + a + ":bob\nbob:" + b + ":bob@example.com", 1, `identity "bob" is the login on line 2`, 0},
		{"cost below 10", "alice:" + a + "\nbob:" + lowCostHash, 2, "bcrypt cost 4 is outside 10 to 14", 0},
		{"cost above 14", "alice:" + withCost(a, "15"), 1, "bcrypt cost 15 is outside 10 to 14", 0},
		{"two costs", "alice:" + a + "\nbob:" + withCost(b, "11"), 2, "bcrypt cost 11, but line 1 has 10", 0},
		{"not bcrypt's base64", "alice:" + a[:20] + "!" + a[21:], 1, "not bcrypt", 0},
		{"duplicate", "alice:" + a + "\n# again\nbob:" + b + "\nalice:" + b, 4, `"alice" is also on line 1`, 0},
		{"duplicate in another case", "alice:" + a + "\nAlice:" + b, 2, `"Alice" is also on line 1 (names are compared ignoring case`, 0},
		{"empty file", "", 0, "no users", 0},
		{"only comments", "# alice:" + a + "\n\n", 0, "no users", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := ParseUsers("/etc/payout/users", strings.NewReader(tc.file))
			if tc.want == "" {
				if err != nil || u.Len() != tc.logins {
					t.Fatalf("err %v, logins %d, want %d", err, u.Len(), tc.logins)
				}
				return
			}
			var fe *UsersFileError
			if !errors.As(err, &fe) || !errors.Is(err, ErrUsersFile) || !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v (%T), want a UsersFileError matching ErrConfig", err, err)
			}
			where := "/etc/payout/users: "
			if tc.line > 0 {
				where = "/etc/payout/users:" + strconv.Itoa(tc.line) + ": "
			}
			msg := err.Error()
			if fe.Line != tc.line || !strings.Contains(msg, where) || !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q (line %d), want %q and %q", msg, fe.Line, where, tc.want)
			}
			for _, secret := range []string{a[7:], b[7:], lowCostHash[7:], alicePass, "HqJZimcKQ", "W6ph5Mm5"} {
				if strings.Contains(msg, secret) {
					t.Fatalf("error %q shows a hash or password", msg)
				}
			}
		})
	}
}

func TestLoadUsersWarnsAboutOpenFile(t *testing.T) {
	a, _ := testHashes(t)
	for _, tc := range []struct {
		mode os.FileMode
		warn bool
	}{{0o600, false}, {0o640, true}, {0o604, true}} {
		p := filepath.Join(t.TempDir(), "users")
		if err := os.WriteFile(p, []byte("alice:"+a+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, tc.mode); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		u, err := LoadUsers(p, zerolog.New(&logs))
		if err != nil || u.Len() != 1 {
			t.Fatalf("mode %v: %v", tc.mode, err)
		}
		if got := strings.Contains(logs.String(), "chmod 600"); got != tc.warn {
			t.Errorf("mode %v: warned %v, want %v: %s", tc.mode, got, tc.warn, logs.String())
		}
		if strings.Contains(logs.String(), a[7:]) {
			t.Errorf("the log shows the hash: %s", logs.String())
		}
	}
	_, err := LoadUsers(filepath.Join(t.TempDir(), "missing"), zerolog.Nop())
	var fe *UsersFileError
	if !errors.As(err, &fe) || !errors.Is(err, os.ErrNotExist) || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing file: %v", err)
	}
}

// usersAuth is an authenticator with the users alice and bob (and a
// token), its bcrypt comparisons counted, in front of a handler that
// records the signed-in user.
type usersAuth struct {
	h        http.Handler
	users    *Users
	now      *time.Time
	logs     *syncBuffer
	mu       sync.Mutex
	compared [][]byte // the hashes compared, in order
	seen     string   // userFrom of the last request served
}

func newUsersAuth(t *testing.T) *usersAuth {
	t.Helper()
	ua, _ := newUsersAuthWith(t)
	return ua
}

// newUsersAuthWith is newUsersAuth, also returning its authenticator.
func newUsersAuthWith(t *testing.T) (*usersAuth, *authenticator) {
	t.Helper()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ua := &usersAuth{users: testUsers(t), now: &now, logs: &syncBuffer{}}
	cfg := Config{Users: ua.users, Token: testToken, Logger: zerolog.New(ua.logs), clock: func() time.Time { return *ua.now }}
	a := newAuthenticator(cfg, newMetrics(prometheus.NewRegistry()))
	a.logins.compare = func(hash, pw []byte) error {
		ua.mu.Lock()
		ua.compared = append(ua.compared, hash)
		ua.mu.Unlock()
		return bcrypt.CompareHashAndPassword(hash, pw)
	}
	ua.h = a.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ua.mu.Lock()
		ua.seen = userFrom(r.Context())
		ua.mu.Unlock()
	}))
	return ua, a
}

func (ua *usersAuth) get(ip string, opts ...reqOpt) int {
	r := httptest.NewRequest("GET", "/batches", nil)
	r.RemoteAddr = ip + ":40000"
	for _, o := range opts {
		o(r)
	}
	ua.mu.Lock()
	ua.seen = ""
	ua.mu.Unlock()
	w := httptest.NewRecorder()
	ua.h.ServeHTTP(w, r)
	return w.Code
}

func (ua *usersAuth) comparisons() int {
	ua.mu.Lock()
	defer ua.mu.Unlock()
	return len(ua.compared)
}

// TestUsersFileAuth runs its cases in order: each starts from the cache
// and the failures the ones before it left (run it whole).
func TestUsersFileAuth(t *testing.T) {
	ua := newUsersAuth(t)
	tests := []struct {
		name     string
		ip       string
		opts     []reqOpt
		want     int
		user     string // signed in as
		compares int    // bcrypt comparisons it took
	}{
		{"alice", "198.51.100.1", []reqOpt{basic("alice", alicePass)}, 200, "alice", 1},
		{"alice again: cached", "198.51.100.2", []reqOpt{basic("alice", alicePass)}, 200, "alice", 0},
		{"bob", "198.51.100.1", []reqOpt{basic("bob", bobPass)}, 200, "bob", 1},
		{"alice, wrong password", "198.51.100.3", []reqOpt{basic("alice", alicePass+"x")}, 401, "", 1},
		{"alice with bob's password", "198.51.100.3", []reqOpt{basic("alice", bobPass)}, 401, "", 1},
		{"name in another case", "198.51.100.3", []reqOpt{basic("Alice", alicePass)}, 401, "", 1},
		{"unknown name: still one comparison", "198.51.100.4", []reqOpt{basic("mallory", alicePass)}, 401, "", 1},
		{"empty name", "198.51.100.4", []reqOpt{basic("", alicePass)}, 401, "", 1},
		{"token alongside", "198.51.100.5", []reqOpt{bearer(testToken)}, 200, tokenUser, 0},
		{"no credentials", "198.51.100.5", nil, 401, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := ua.comparisons()
			if got := ua.get(tc.ip, tc.opts...); got != tc.want {
				t.Fatalf("status %d, want %d", got, tc.want)
			}
			if ua.seen != tc.user {
				t.Errorf("signed in as %q, want %q", ua.seen, tc.user)
			}
			if n := ua.comparisons() - before; n != tc.compares {
				t.Errorf("%d bcrypt comparisons, want %d", n, tc.compares)
			}
		})
	}
	// The unknown name was compared with the dummy hash, of the file's cost.
	ua.mu.Lock()
	dummy := ua.compared[len(ua.compared)-1]
	ua.mu.Unlock()
	if !bytes.Equal(dummy, ua.users.dummy) {
		t.Fatalf("unknown name compared with %q, want the dummy hash", dummy)
	}
	if c, err := bcrypt.Cost(dummy); err != nil || c != MinUserCost {
		t.Fatalf("dummy hash cost %d (%v), want %d like the file's", c, err, MinUserCost)
	}
	logs := ua.logs.String()
	// A name in the file is logged; any other is not (it may be a password
	// typed into the name field).
	if !strings.Contains(logs, `"user":"alice"`) || !strings.Contains(logs, `"user_known":false`) || !strings.Contains(logs, "failed login") {
		t.Errorf("failed logins not logged with the known name:\n%s", logs)
	}
	if strings.Contains(logs, "mallory") || strings.Contains(logs, `"user":"Alice"`) {
		t.Errorf("a name not in the file is logged:\n%s", logs)
	}
	for _, secret := range []string{alicePass, bobPass, string(ua.users.hashes["alice"][7:])} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log shows a password or hash:\n%s", logs)
		}
	}
	// Past loginTTL the cache no longer answers: bcrypt runs again.
	*ua.now = ua.now.Add(loginTTL + time.Second)
	before := ua.comparisons()
	if got := ua.get("198.51.100.6", basic("alice", alicePass)); got != 200 || ua.comparisons()-before != 1 {
		t.Fatalf("after the TTL: status %d, %d comparisons, want 200 and 1", got, ua.comparisons()-before)
	}
}

func TestUsersFileFailuresLockOut(t *testing.T) {
	ua := newUsersAuth(t)
	for i := 1; i <= 5; i++ {
		if got := ua.get("203.0.113.7", basic("alice", "guess")); got != 401 {
			t.Fatalf("failure %d: %d, want 401", i, got)
		}
	}
	before := ua.comparisons()
	if got := ua.get("203.0.113.7", basic("alice", alicePass)); got != http.StatusTooManyRequests || ua.comparisons() != before {
		t.Fatalf("after 5 failures: %d with %d comparisons, want 429 without bcrypt", got, ua.comparisons()-before)
	}
	if !strings.Contains(ua.logs.String(), "locked out") {
		t.Error("lockout not logged")
	}
	if got := ua.get("203.0.113.8", basic("alice", alicePass)); got != 200 {
		t.Fatalf("another IP: %d", got)
	}
}

func TestLoginCacheBound(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	c := newLoginCache(3, func() time.Time { return now })
	put := func(names ...string) {
		for _, n := range names {
			c.put(n, c.mac(n, "pw-"+n))
		}
	}
	put("a", "b", "c", "a") // a again: no new entry
	if c.len() != 3 {
		t.Fatalf("%d entries, want 3", c.len())
	}
	put("d") // full, none expired: one dropped
	if c.len() != 3 || !c.hit("d", c.mac("d", "pw-d")) {
		t.Fatalf("%d entries (want 3), d cached %v", c.len(), c.hit("d", c.mac("d", "pw-d")))
	}
	now = now.Add(loginTTL)
	put("e") // full, all expired: they go
	if c.len() != 1 || !c.hit("e", c.mac("e", "pw-e")) {
		t.Fatalf("%d entries after the expired were dropped, want 1", c.len())
	}
	if c.hit("e", c.mac("e", "other")) || c.hit("e", c.mac("d", "pw-e")) || c.hit("x", c.mac("e", "pw-e")) {
		t.Fatal("a hit for another password or name")
	}
	if c.mac("ab", "c") == c.mac("a", "bc") || c.mac("alice", "p\x00q") == c.mac("alice\x00p", "q") {
		t.Fatal("name and password not separated in the MAC")
	}
}

// A person signed in from the same IP (or behind the same proxy) does not
// wipe the failures left by guesses at another name.
func TestUsersFileSuccessKeepsOthersFailures(t *testing.T) {
	ua := newUsersAuth(t)
	const ip = "203.0.113.9"
	for i := 1; i <= 4; i++ {
		if got := ua.get(ip, basic("bob", "guess-"+strconv.Itoa(i))); got != 401 {
			t.Fatalf("guess %d: %d, want 401", i, got)
		}
	}
	if got := ua.get(ip, basic("alice", alicePass)); got != 200 {
		t.Fatalf("alice: %d, want 200", got)
	}
	if got := ua.get(ip, basic("bob", "guess-5")); got != 401 {
		t.Fatalf("guess 5: %d, want 401", got)
	}
	if got := ua.get(ip, basic("bob", bobPass)); got != http.StatusTooManyRequests {
		t.Fatalf("after 5 guesses with alice's login between them: %d, want 429 (locked out)", got)
	}
}

// blockingCompare makes ua's bcrypt comparisons wait until release is
// closed, counting those begun.
func blockingCompare(ua *usersAuth, a *authenticator) (release chan struct{}) {
	release = make(chan struct{})
	a.logins.compare = func(hash, pw []byte) error {
		ua.mu.Lock()
		ua.compared = append(ua.compared, hash)
		ua.mu.Unlock()
		<-release
		return bcrypt.CompareHashAndPassword(hash, pw)
	}
	return release
}

// parallel sends n requests at once from ip with the credentials of
// opt(i), and returns a func that waits for them and counts the statuses.
func (ua *usersAuth) parallel(n int, ip string, opt func(i int) reqOpt) (wait func() map[int]int, codes chan int) {
	codes = make(chan int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := httptest.NewRequest("GET", "/batches", nil)
			r.RemoteAddr = ip + ":40000"
			opt(i)(r)
			w := httptest.NewRecorder()
			ua.h.ServeHTTP(w, r)
			codes <- w.Code
		}()
	}
	return func() map[int]int {
		wg.Wait()
		close(codes)
		m := map[int]int{}
		for c := range codes {
			m[c]++
		}
		return m
	}, codes
}

// Guesses sent at once cannot all pass the limiter before the first of
// them fails: at most max (5) are compared, the others answered 429.
func TestUsersFileParallelGuesses(t *testing.T) {
	ua, a := newUsersAuthWith(t)
	release := blockingCompare(ua, a)
	wait, codes := ua.parallel(64, "203.0.113.10", func(i int) reqOpt { return basic("alice", "guess-"+strconv.Itoa(i)) })
	// 59 are refused while the first 5 are still being compared.
	refused := map[int]int{}
	deadline := time.Now().Add(20 * time.Second)
	for refused[http.StatusTooManyRequests] < 59 {
		select {
		case c := <-codes:
			refused[c]++
		case <-time.After(time.Until(deadline)):
			close(release)
			t.Fatalf("answers before any comparison ended: %v, want 59 x 429 (%d comparisons begun)", refused, ua.comparisons())
		}
	}
	close(release)
	got := wait()
	for c, n := range refused {
		got[c] += n
	}
	if got[http.StatusTooManyRequests] != 59 || got[401] != 5 || ua.comparisons() != 5 {
		t.Fatalf("answers %v with %d comparisons, want 59 x 429, 5 x 401 and 5 comparisons", got, ua.comparisons())
	}
}

// The requests of one browser loading a page carry the same credentials
// at once: they share one comparison and one attempt, none is refused.
func TestUsersFileSameCredentialsAtOnce(t *testing.T) {
	ua, a := newUsersAuthWith(t)
	release := blockingCompare(ua, a)
	wait, _ := ua.parallel(12, "203.0.113.11", func(int) reqOpt { return basic("alice", alicePass) })
	deadline := time.Now().Add(20 * time.Second)
	for ua.comparisons() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no comparison began")
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	if got := wait(); got[200] != 12 {
		t.Fatalf("answers %v, want 12 x 200", got)
	}
	if n := ua.comparisons(); n > 5 {
		t.Fatalf("%d comparisons for one login sent 12 times at once, want them shared", n)
	}
}

// At most cap(slots) comparisons run at once in the process, whatever the
// number of clients.
func TestUsersFileComparisonsBounded(t *testing.T) {
	ua, a := newUsersAuthWith(t)
	a.logins.slots = make(chan struct{}, 2)
	var mu sync.Mutex
	running, most := 0, 0
	a.logins.compare = func(hash, pw []byte) error {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		err := bcrypt.CompareHashAndPassword(hash, pw)
		mu.Lock()
		running--
		mu.Unlock()
		return err
	}
	var waits []func() map[int]int
	for i := 0; i < 8; i++ {
		w, _ := ua.parallel(1, "192.0.2."+strconv.Itoa(10+i), func(int) reqOpt { return basic("bob", "guess") })
		waits = append(waits, w)
	}
	for _, w := range waits {
		if got := w(); got[401] != 1 {
			t.Fatalf("answers %v, want 401", got)
		}
	}
	if most > 2 || most == 0 {
		t.Fatalf("%d comparisons ran at once, want at most 2", most)
	}
}

// A comparison that panics still ends its attempt and frees its slot: a
// leaked attempt would hold the IP's limit, a leaked slot every login.
func TestUsersFileComparePanicLeaksNothing(t *testing.T) {
	ua, a := newUsersAuthWith(t)
	a.logins.compare = func(hash, pw []byte) error { panic("bcrypt broke") }
	a.logins.slots = make(chan struct{}, 8) // a leak shows as slots held, not as a hang
	const ip = "203.0.113.12"
	for i := 0; i < 3; i++ {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("the panic did not reach the caller")
				}
			}()
			a.logins.attempt(ip, "alice", "pw-"+strconv.Itoa(i), a.limiter)
		}()
	}
	if n := len(a.logins.slots); n != 0 {
		t.Fatalf("%d comparison slots held after the panics, want 0", n)
	}
	a.limiter.mu.Lock()
	f := a.limiter.clients[ip]
	a.limiter.mu.Unlock()
	if f == nil || f.inflight != 0 || f.count != 3 {
		t.Fatalf("limiter entry %+v after 3 panics, want none in flight and 3 failures", f)
	}
	_ = ua
}
