package api

import (
	"context"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
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

// FuzzItemPaths: an item the typed decode reads (item's fast path) gives
// the line and the problems the field-by-field read gives (itemByFields,
// which names each problem's field): the two readings of one item never
// disagree.
func FuzzItemPaths(f *testing.F) {
	for _, s := range []string{
		`{"externalId":"A-1","amount":"1","destination":{"cardNumber":"4111111111111111"}}`,
		`{"externalId":"A-2","amount":"2.50","destination":{"telecomOperator":"MTS","phoneNumber":"+7900"},"info":{"note":"a, \"b\"","payDate":"2026-12-24"}}`,
		`{"externalId":"A-\u0007","amount":null,"destination":{},"info":{}}`,
		`{"externalId":"A-3","amount":"1","destination":{"cardNumber":"4111"},"info":{"externalId":"x","bad name!":"y"}}`,
		`{"amount":"\ud83d\ude00","destination":{"phoneNumber":"\n"},"info":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v := jsontext.Value(raw)
		if !v.IsValid() {
			return
		}
		var w wireItem
		if json.Unmarshal(v, &w, json.RejectUnknownMembers(true)) != nil || w.Destination == nil {
			return // the fast path does not read it
		}
		fast, slow := &intake{}, &intake{}
		lf, errf := fast.item(0, v)
		ls, errs := slow.itemByFields(0, v)
		if errf != nil || errs != nil {
			t.Fatalf("errors: fast %v, by fields %v", errf, errs)
		}
		if !reflect.DeepEqual(lf, ls) || !reflect.DeepEqual(fast.problems, slow.problems) || !slices.Equal(fast.info, slow.info) {
			t.Fatalf("%s:\nfast      %+v %+v %v\nby fields %+v %+v %v", raw, lf, fast.problems, fast.info, ls, slow.problems, slow.info)
		}
	})
}

// TestStrictJSON: a body a second reader could read another way is
// refused whole, naming where: a name given twice in an item or at the
// top, invalid UTF-8.
func TestStrictJSON(t *testing.T) {
	for _, c := range []struct{ name, body, says string }{
		{"amount twice", `{"items":[{"externalId":"A","amount":"1","amount":"1000","destination":{"cardNumber":"4111111111111111"}}]}`, "/items/0"},
		{"items twice", `{"items":[],"items":[{"externalId":"A","amount":"1","destination":{"cardNumber":"4111111111111111"}}]}`, "items"},
		{"card twice", `{"items":[{"externalId":"A","amount":"1","destination":{"cardNumber":"4111111111111111","cardNumber":"5555555555554444"}}]}`, "/items/0"},
		{"invalid UTF-8", "{\"items\":[{\"externalId\":\"A\xff\",\"amount\":\"1\",\"destination\":{\"cardNumber\":\"4111111111111111\"}}]}", "UTF-8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := readCreate(context.Background(), strings.NewReader(c.body), t.TempDir(), 10, "t")
			var p *Problem
			if !errors.As(err, &p) || p.Type != TypeBase+KindBadRequest || !strings.Contains(p.Detail, c.says) {
				t.Fatalf("got %v, want a bad request naming %q", err, c.says)
			}
		})
	}
}
