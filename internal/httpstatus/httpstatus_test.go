package httpstatus

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// body, in the writes of a case, stands for a Write of a body.
const body = 0

func TestWriterKeepsTheFirstStatus(t *testing.T) {
	for _, tc := range []struct {
		writes []int // WriteHeader(code) each, or body
		want   int
	}{
		{nil, 0},
		{[]int{body}, http.StatusOK},
		{[]int{http.StatusTeapot}, http.StatusTeapot},
		{[]int{http.StatusNotFound, http.StatusOK}, http.StatusNotFound},
		{[]int{body, http.StatusInternalServerError}, http.StatusOK},
	} {
		w := &Writer{ResponseWriter: httptest.NewRecorder()}
		for _, code := range tc.writes {
			if code == body {
				_, _ = w.Write([]byte("ok"))
				continue
			}
			w.WriteHeader(code)
		}
		if w.Code != tc.want {
			t.Errorf("writes %v: Code %d, want %d", tc.writes, w.Code, tc.want)
		}
	}
}
