package payfile

import (
	"context"
	"strings"
	"testing"
)

// BenchmarkCheck parses and validates a generated 10,000-row file.
func BenchmarkCheck(b *testing.B) {
	const n = 10_000
	in := generate(n, nil)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		sum, err := Check(context.Background(), "bench.csv", strings.NewReader(in), Options{}, func(e Error) { b.Fatal(e) })
		if err != nil || sum.ValidRows != n {
			b.Fatalf("%v %+v", err, sum)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
}
