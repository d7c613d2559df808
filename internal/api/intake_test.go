package api

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestIntakeCSV: the CSV the loader reads has one column per info key of
// any item, in the order first seen, every line padded to the header,
// and values that need CSV quoting kept as they are.
func TestIntakeCSV(t *testing.T) {
	body := `{"items":[
		{"externalId":"A-1","amount":"1","destination":{"cardNumber":"4111111111111111"}},
		{"externalId":"A-2","amount":"2","destination":{"telecomOperator":"MTS","phoneNumber":"+79001234567"},"info":{"note":"a, \"b\""}},
		{"externalId":"A-\u00e9","amount":"3","destination":{"cardNumber":"4111111111111111"},"info":{"payDate":"2026-12-24","note":"c"}}
	]}`
	in, path, err := readCreate(context.Background(), strings.NewReader(body), t.TempDir(), 10, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(in.problems) != 0 {
		t.Fatalf("problems: %+v", in.problems)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "externalId,amount,cardNumber,telecomOperator,phoneNumber,note,payDate\n" +
		"A-1,1,4111111111111111,,,,\n" +
		"A-2,2,,MTS,+79001234567,\"a, \"\"b\"\"\",\n" +
		"A-é,3,4111111111111111,,,c,2026-12-24\n"
	if string(got) != want {
		t.Fatalf("CSV:\n%s\nwant:\n%s", got, want)
	}
}
