// Package httpstatus records the status code an HTTP handler answers with,
// for middleware that logs, counts or acts on it after the handler.
package httpstatus

import "net/http"

// Writer passes everything to ResponseWriter and keeps the first status
// written in Code: 0 until the handler writes a header or a body (then
// 200). It does not unwrap: a caller that needs http.ResponseController to
// reach the connection adds an Unwrap method.
type Writer struct {
	http.ResponseWriter
	Code int
}

// WriteHeader records code, if no status was written before, and writes it.
func (w *Writer) WriteHeader(code int) {
	if w.Code == 0 {
		w.Code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records 200, if no status was written before, and writes p.
func (w *Writer) Write(p []byte) (int, error) {
	if w.Code == 0 {
		w.Code = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}
