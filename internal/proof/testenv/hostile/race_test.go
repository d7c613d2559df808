//go:build race

package hostile_test

const raceEnabled = true
