// Package fakeredis gives tests in-process Redis servers (miniredis) that
// misbehave on purpose, for the paths that must hold when Redis fails, and
// a sound one to stand beside them. It
// is apart from redistest so that the modules using real redis-servers do
// not depend on miniredis.
package fakeredis

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Working returns a client of an in-process Redis that behaves, closed at
// cleanup: the sound side of a test in which another Redis fails.
func Working(t testing.TB) *redis.Client {
	t.Helper()
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Refusing returns a client of a Redis that answers every command with an
// error (a server "loading its dataset"), closed at cleanup: for a
// failure between two writes, such as an approval recorded whose creates
// cannot be enqueued.
func Refusing(t testing.TB) *redis.Client {
	t.Helper()
	m := miniredis.RunT(t)
	m.SetError("LOADING Redis is loading the dataset in memory")
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
