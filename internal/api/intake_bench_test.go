package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
)

// BenchmarkReadCreate: the intake of a 15,000-item create (JSON to the
// CSV file the loader reads), the API's own work before the load.
func BenchmarkReadCreate(b *testing.B) {
	var body bytes.Buffer
	body.WriteString(`{"items":[`)
	for i := range 15000 {
		if i > 0 {
			body.WriteByte(',')
		}
		it, _ := json.Marshal(map[string]any{"externalId": fmt.Sprintf("BENCH-%09d", i), "amount": "1234.56",
			"destination": map[string]string{"cardNumber": "4111111111111111"}})
		body.Write(it)
	}
	body.WriteString("]}")
	dir := b.TempDir()
	b.SetBytes(int64(body.Len()))
	for b.Loop() {
		if _, _, err := readCreate(context.Background(), bytes.NewReader(body.Bytes()), dir, 15000, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}
