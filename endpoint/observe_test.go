package endpoint

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/metric/noop"
)

// Clients choose operation names; past maxOperationNames of them, and for
// over-long ones, metrics say "other", so no client can grow the series
// without bound.
func TestOperationNamesAreBounded(t *testing.T) {
	o, err := newObserver(noop.NewMeterProvider().Meter(""), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxOperationNames + 100 {
		o.labels(fmt.Sprint("Op", i), "query", "post", "ok")
		o.labels(fmt.Sprint("Op", i), "query", "post", "NOT_FOUND")
	}
	o.labels(string(make([]byte, 65)), "query", "post", "ok")
	series := 0
	o.attrs.Range(func(k, _ any) bool { series++; return true })
	if len(o.names) != maxOperationNames || series != 2*maxOperationNames+2 {
		t.Fatalf("%d names, %d series; want %d names, %d series", len(o.names), series, maxOperationNames, 2*maxOperationNames+2)
	}
	if _, ok := o.attrs.Load(seriesKey{"other", "query", "post", "NOT_FOUND"}); !ok {
		t.Fatal("names past the bound are not counted as other")
	}
}
