//go:build !race

package operator

const raceEnabled = false
