//go:build race

package payfile

const raceEnabled = true
